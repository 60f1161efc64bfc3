"""The form a user sets an alert rule with: which fields each kind needs, said plainly."""

from typing import Any

from django import forms
from django.contrib.auth.models import User

from monitoring.alerts.delivery import WebhookRefused, webhook_check
from monitoring.models import AlertKind, AlertRule
from projects.models import Membership, Project

MAX_RULES_PER_USER = 50


class AlertRuleForm(forms.ModelForm):
    class Meta:
        model = AlertRule
        fields = [
            "kind",
            "series",
            "threshold",
            "step",
            "factor",
            "project",
            "to_portal",
            "to_mail",
            "webhook_url",
        ]
        widgets = {"webhook_url": forms.URLInput()}
        field_classes = {"webhook_url": forms.CharField}
        labels = {
            "series": "Series name",
            "threshold": "Bound (loss above) or minutes left (time limit)",
            "step": "After step",
            "factor": "Drop factor (throughput below its recent median divided by this)",
            "project": "For every job of project (owners only; empty: your own jobs)",
            "to_portal": "Show in the portal",
            "to_mail": "Send a mail",
            "webhook_url": "Webhook URL (Slack-compatible)",
        }

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        # Only a project's owners set rules for all of its jobs.
        self.fields["project"] = forms.ModelChoiceField(
            queryset=Project.objects.filter(
                memberships__user=user, memberships__role=Membership.Role.OWNER
            ).order_by("slug"),
            required=False,
            label=self.fields["project"].label,
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind")
        threshold, factor = data.get("threshold"), data.get("factor")
        if kind == AlertKind.LOSS_ABOVE and threshold is None:
            self.add_error("threshold", "Give the bound the series must stay under.")
        if kind == AlertKind.THROUGHPUT_DROP and factor is not None and factor <= 1:
            self.add_error("factor", "A drop factor is above 1: 2 means half the recent median.")
        if kind == AlertKind.TIME_LIMIT and threshold is not None and threshold <= 0:
            self.add_error("threshold", "Give the minutes left, above 0 (10 if left empty).")
        series_kinds = (AlertKind.LOSS_NONFINITE, AlertKind.LOSS_ABOVE, AlertKind.THROUGHPUT_DROP)
        if kind in series_kinds and not (data.get("series") or "").strip():
            self.add_error("series", "Name the series, as on the job page (e.g. loss).")
        if not (data.get("to_portal") or data.get("to_mail") or data.get("webhook_url")):
            self.add_error(None, "Choose at least one way to be told: portal, mail or webhook.")
        if data.get("to_mail") and not self.user.email:
            self.add_error("to_mail", "Your account has no mail address to send to.")
        if AlertRule.objects.filter(owner=self.user).count() >= MAX_RULES_PER_USER:
            self.add_error(None, f"You have {MAX_RULES_PER_USER} rules: delete one first.")
        return data

    def clean_webhook_url(self) -> str:
        url: str = self.cleaned_data.get("webhook_url") or ""
        if url:
            try:
                webhook_check(url)
            except WebhookRefused as exc:
                raise forms.ValidationError(str(exc)) from exc
        return url
