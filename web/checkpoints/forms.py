"""The retention rule as a form (the page) and its values for the service and the preview."""

from datetime import timedelta
from typing import Any

from django import forms

from monitoring.models import BestMode, CheckpointRule

GIB = 1024**3
# Bounds the page's form and the API's serializer share.
MAX_KEEP = 100_000
MAX_DAYS = 36_500.0
MAX_QUOTA_GIB = 1e9


class RuleForm(forms.Form):
    keep_last = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_KEEP,
        label="Keep the last",
        help_text="checkpoints, by step",
    )
    keep_best = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_KEEP, label="Keep the best"
    )
    best_metric = forms.CharField(
        required=False, max_length=200, label="by metric", help_text="e.g. loss or eval_loss"
    )
    best_mode = forms.ChoiceField(choices=BestMode.choices, initial=BestMode.MIN, required=False)
    older_than_days = forms.FloatField(
        required=False, min_value=0.01, max_value=MAX_DAYS, label="Delete those older than (days)"
    )
    quota_gib = forms.FloatField(
        required=False,
        min_value=0.001,
        max_value=MAX_QUOTA_GIB,
        label="Project storage quota (GiB)",
    )

    def __init__(self, *args: Any, project_scope: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not project_scope:
            del self.fields["quota_gib"]

    def rule_fields(self) -> dict[str, Any]:
        """The cleaned values as `checkpoint_rule_save` takes them."""
        data = self.cleaned_data
        days = data.get("older_than_days")
        quota = data.get("quota_gib")
        return {
            "keep_last": data.get("keep_last"),
            "keep_best": data.get("keep_best"),
            "best_metric": (data.get("best_metric") or "").strip(),
            "best_mode": data.get("best_mode") or BestMode.MIN,
            "older_than": timedelta(days=days) if days else None,
            "quota_bytes": round(quota * GIB) if quota else None,
        }


def initial_of(rule: CheckpointRule | None) -> dict[str, Any]:
    if rule is None:
        return {}
    return {
        "keep_last": rule.keep_last,
        "keep_best": rule.keep_best,
        "best_metric": rule.best_metric,
        "best_mode": rule.best_mode,
        "older_than_days": rule.older_than.total_seconds() / 86400 if rule.older_than else None,
        "quota_gib": rule.quota_bytes / GIB if rule.quota_bytes else None,
    }


def transient_rule(fields: dict[str, Any]) -> CheckpointRule:
    """An unsaved rule with these values: what a preview plans with."""
    return CheckpointRule(
        keep_last=fields["keep_last"],
        keep_best=fields["keep_best"],
        best_metric=fields["best_metric"],
        best_mode=fields["best_mode"],
        older_than=fields["older_than"],
    )
