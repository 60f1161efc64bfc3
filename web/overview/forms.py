"""The idle-policy form of one project's row: durations in minutes, the model's validators
deciding (through projects.idle_policy) what is allowed."""

from datetime import timedelta
from typing import Any

from django import forms

from projects.models import IdlePolicy, Project

DEFAULT = IdlePolicy()  # the model's defaults, for a project without a policy
A_YEAR = 365 * 24 * 60  # minutes: longer is a typing slip (and past timedelta's range)


def _minutes(value: timedelta | None) -> float | int | None:
    """Minutes as the box shows them: `60`, `0.5`."""
    if value is None:
        return None
    minutes = round(value.total_seconds() / 60, 2)
    return int(minutes) if minutes.is_integer() else minutes


def policy_words(policy: IdlePolicy) -> str:
    """`warn after 60 min under 10 %, cancel 30 min later`."""
    words = f"warn after {_minutes(policy.warn_after)} min under {policy.threshold_percent} %"
    if policy.cancel_after is not None:
        words += f", cancel {_minutes(policy.cancel_after)} min later"
    return words


class IdlePolicyForm(forms.Form):
    watch = forms.BooleanField(
        required=False,
        label="Watch idle GPUs",
        help_text="Off: no warning and no cancel for idle GPUs in this project.",
    )
    # Needed only when watching: switching the watch off needs no valid numbers.
    threshold_percent = forms.IntegerField(
        label="Idle under (% utilisation)", min_value=1, max_value=100, required=False
    )
    warn_after = forms.FloatField(
        label="Warn after (min)", min_value=0, max_value=A_YEAR, required=False
    )
    cancel_after = forms.FloatField(
        label="Cancel after (min more)",
        min_value=0,
        max_value=A_YEAR,
        required=False,
        help_text="Blank: never cancel.",
    )

    def __init__(self, *args: Any, project: Project, policy: IdlePolicy | None, **kwargs: Any):
        shown = policy or DEFAULT
        kwargs.setdefault(
            "initial",
            {
                "watch": policy is not None,
                "threshold_percent": shown.threshold_percent,
                "warn_after": _minutes(shown.warn_after),
                "cancel_after": _minutes(shown.cancel_after),
            },
        )
        kwargs.setdefault("prefix", f"idle-{project.slug}")
        super().__init__(*args, **kwargs)
        self.project = project
        self.policy = policy
        # The inputs sit in the row's cells; the row's <form> is in its last cell.
        for field in self.fields.values():
            attrs = {
                "form": f"policy-form-{project.slug}",
                "aria-label": f"{field.label}, {project.slug}",
            }
            if isinstance(field.widget, forms.NumberInput):
                attrs.update({"step": "any", "inputmode": "decimal"})
            field.widget.attrs.update(attrs)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("watch"):
            if data.get("threshold_percent") is None and "threshold_percent" not in self.errors:
                self.add_error("threshold_percent", "Say under what utilisation a GPU is idle.")
            if data.get("warn_after") is None and "warn_after" not in self.errors:
                self.add_error("warn_after", "Say after how many minutes idle to warn.")
        return data

    def durations(self) -> dict[str, Any]:
        """The cleaned values as the service takes them."""
        data = self.cleaned_data
        cancel = data.get("cancel_after")
        return {
            "threshold_percent": data["threshold_percent"],
            "warn_after": timedelta(minutes=data["warn_after"]),
            "cancel_after": None if cancel is None else timedelta(minutes=cancel),
        }
