"""The new-sweep form: the trials' job spec, the search and its budget, as one sweep row."""

import json
from typing import Any

from django import forms
from django.contrib.auth.models import User

from portal_lib.bounds import INT_MAX
from sweeps.models import MAX_TRIALS_LIMIT, Sweep
from web.jobs.forms import TIME_LIMIT_HELP, CodeInputs, TimeLimitField, usable_clusters

SPACE_HELP = (
    'JSON: each setting as a list of choices or a range, e.g. {"lr": {"type": "float", '
    '"low": 0.0001, "high": 0.1, "log": true}, "layers": [2, 4, 8]}.'
)
FIRST_HELP = (
    'Optional JSON list of settings to try first, e.g. [{"lr": 0.01, "nodes": 2}]: '
    '"nodes" gives that trial its own node count.'
)


class JSONTextField(forms.CharField):
    """JSON typed into a text box; the sweep's own check says what the value must hold."""

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if not text:
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not JSON: {exc.msg} (line {exc.lineno}).") from exc

    def prepare_value(self, value: Any) -> Any:
        return value if isinstance(value, str) or value is None else json.dumps(value)


class SweepForm(CodeInputs, forms.ModelForm):
    space = JSONTextField(widget=forms.Textarea(attrs={"rows": 4}), help_text=SPACE_HELP)
    first_trials = JSONTextField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), help_text=FIRST_HELP
    )
    time_limit = TimeLimitField(initial="1:00:00", help_text=TIME_LIMIT_HELP)
    max_trials = forms.IntegerField(min_value=1, max_value=MAX_TRIALS_LIMIT, initial=8)
    max_concurrent = forms.IntegerField(min_value=1, max_value=MAX_TRIALS_LIMIT, initial=2)
    nodes = forms.IntegerField(min_value=1, max_value=INT_MAX, initial=1)
    gpus_per_node = forms.IntegerField(min_value=0, max_value=INT_MAX, initial=1)
    cpus_per_task = forms.IntegerField(min_value=1, max_value=INT_MAX, initial=1)
    report_every = forms.IntegerField(min_value=1, max_value=INT_MAX, initial=10)
    warmup_steps = forms.IntegerField(min_value=1, max_value=INT_MAX, initial=10)
    startup_trials = forms.IntegerField(min_value=0, max_value=MAX_TRIALS_LIMIT, initial=2)
    seed = forms.IntegerField(min_value=0, max_value=INT_MAX, initial=0)

    class Meta:
        model = Sweep
        fields = [
            "name",
            "cluster",
            "partition",
            "template",
            "setup",
            "command",
            "nodes",
            "gpus_per_node",
            "cpus_per_task",
            "memory_mb",
            "time_limit",
            "space",
            "first_trials",
            "sampler",
            "seed",
            "pruner",
            "metric",
            "direction",
            "report_every",
            "warmup_steps",
            "startup_trials",
            "max_trials",
            "max_concurrent",
        ]
        widgets = {
            "command": forms.Textarea(attrs={"rows": 2}),
            "setup": forms.Textarea(attrs={"rows": 2}),
        }

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["cluster"].queryset = usable_clusters(user=user)  # type: ignore[attr-defined]
        self.fields["command"].help_text = (
            "Each trial's command: {name} stands for a setting of the search, e.g. "
            "portal-examples/ddp_train.py --steps 200 --lr {lr}."
        )

    def clean_first_trials(self) -> Any:
        return self.cleaned_data.get("first_trials") or []
