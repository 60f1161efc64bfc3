"""The new-sweep form: the trials' job spec, the search and its budget, as one sweep row."""

import json
from typing import Any

from django import forms
from django.contrib.auth.models import User

from clusters.examples import EXAMPLE_COMMAND
from jobs.enums import TRIAL_TEMPLATES
from portal_lib.bounds import INT_MAX
from sweeps.models import MAX_TRIALS_LIMIT, Sweep
from web.jobs.forms import (
    TIME_LIMIT_HELP,
    CodeInputs,
    TimeLimitField,
    _number,
    usable_clusters,
)

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
    space = JSONTextField(
        label="Search space", widget=forms.Textarea(attrs={"rows": 4}), help_text=SPACE_HELP
    )
    first_trials = JSONTextField(
        label="Settings to try first",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=FIRST_HELP,
    )
    time_limit = TimeLimitField(
        label="Time limit per trial", initial="1:00:00", help_text=TIME_LIMIT_HELP
    )
    max_trials = _number("Trials in all", 1, MAX_TRIALS_LIMIT, 8)
    max_concurrent = _number("Trials at once", 1, MAX_TRIALS_LIMIT, 2)
    nodes = _number("Nodes", 1, INT_MAX, 1)
    gpus_per_node = _number("GPUs per node", 0, INT_MAX, 1)
    cpus_per_task = _number("CPUs per node", 1, INT_MAX, 1)
    report_every = _number(
        "Judge every (steps)", 1, INT_MAX, 10, help_text="The metric is compared at each multiple."
    )
    warmup_steps = _number(
        "Never stop before step",
        1,
        INT_MAX,
        10,
        help_text="Median: its warm-up; halving: its first rung.",
    )
    startup_trials = _number("Finished trials before stopping any", 0, MAX_TRIALS_LIMIT, 2)
    seed = _number("Random seed", 0, INT_MAX, 0)

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
            "command": forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
            "setup": forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        }
        labels = {
            "name": "Sweep name",
            "cluster": "Cluster",
            "partition": "Partition",
            "template": "Template",
            "setup": "Environment set-up",
            "command": "Command",
            "memory_mb": "Memory per node (MB)",
            "sampler": "Sampler",
            "pruner": "Stop losing trials by",
            "metric": "Metric to judge by",
            "direction": "Goal",
        }
        help_texts = {
            "partition": "Blank: the cluster's default.",
            "setup": "Shell lines run first: module load, conda activate, ...",
            "memory_mb": "Blank: the partition's default.",
            "metric": "A series name, as on the job page (e.g. loss).",
        }

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cluster = self.fields["cluster"]
        assert isinstance(cluster, forms.ModelChoiceField)  # noqa: S101 - the model's foreign key
        cluster.queryset = usable_clusters(user=user)
        # As on the job form: no empty choice, so the only cluster (or the first) is chosen.
        cluster.empty_label = None
        cluster.error_messages["invalid_choice"] = "Choose a cluster you have an account on."
        template = self.fields["template"]
        assert isinstance(template, forms.TypedChoiceField)  # noqa: S101 - the model's choices
        template.choices = TRIAL_TEMPLATES
        self.fields["command"].help_text = (
            "Each trial's command: {name} stands for a setting of the search, e.g. "
            f"{EXAMPLE_COMMAND} --lr {{lr}}."
        )

    def clean_first_trials(self) -> Any:
        return self.cleaned_data.get("first_trials") or []
