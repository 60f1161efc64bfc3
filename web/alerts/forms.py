"""The form a user sets an alert rule with: which fields each kind needs, said plainly."""

from typing import Any

from django import forms
from django.contrib.auth.models import User

from monitoring.alerts.delivery import WebhookRefused, webhook_check
from monitoring.alerts.rules import KIND_SETTINGS, SERIES
from monitoring.alerts.services import alert_rule_twin, duplicate_refusal
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
        widgets = {
            "webhook_url": forms.URLInput(
                attrs={"placeholder": "https://hooks.slack.com/services/…", "spellcheck": "false"}
            ),
            "series": forms.TextInput(attrs={"spellcheck": "false"}),
        }
        field_classes = {"webhook_url": forms.CharField}
        labels = {
            "kind": "When",
            "series": "Series",
            "threshold": "Bound",
            "step": "After step",
            "factor": "Drop factor",
            "project": "For",
            "to_portal": "Show in the portal",
            "to_mail": "Send a mail",
            "webhook_url": "Webhook URL",
        }
        help_texts = {
            "series": "As the job page names it, e.g. loss or tokens_per_sec.",
            "threshold": "Loss above: the bound it must stay under. Time limit: the minutes "
            "left (10 if blank).",
            "step": "The bound applies from this step on (blank: from the start).",
            "factor": "Told when the series falls below its recent median divided by this "
            "(2 if blank: half).",
            "webhook_url": 'Slack-compatible: the alert is posted as {"text": ...}.',
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
            empty_label="Your own jobs",
            label=self.fields["project"].label,
            help_text="A project you own: every job of it, whoever submits.",
        )
        self.fields["series"].required = False  # only the kinds that read one ask for it
        kind = self.fields["kind"]
        assert isinstance(kind, forms.ChoiceField)  # noqa: S101 - the model's choices
        kind.choices = [("", "Choose when to be told"), *AlertKind.choices]

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
        used = KIND_SETTINGS.get(str(kind), ())
        if SERIES in used and not (data.get("series") or "").strip():
            self.add_error("series", "Name the series, as on the job page (e.g. loss).")
        # What the kind does not read is not kept: a hidden field's value is no setting.
        for name in ("threshold", "step", "factor"):
            if name not in used and name in data:
                data[name] = None
        if SERIES not in used or not (data.get("series") or "").strip():
            data["series"] = AlertRule._meta.get_field("series").get_default()
        if not (data.get("to_portal") or data.get("to_mail") or data.get("webhook_url")):
            self.add_error(None, "Choose at least one way to be told: portal, mail or webhook.")
        if data.get("to_mail") and not self.user.email:
            self.add_error("to_mail", "Your account has no mail address to send to.")
        if AlertRule.objects.filter(owner=self.user).count() >= MAX_RULES_PER_USER:
            self.add_error(None, f"You have {MAX_RULES_PER_USER} rules: delete one first.")
        if kind and not self.errors:
            rule = AlertRule(
                owner=self.user,
                kind=kind,
                project=data.get("project"),
                **{k: data.get(k) for k in ("series", "threshold", "step", "factor")},
            )
            if (twin := alert_rule_twin(owner=self.user, rule=rule)) is not None:
                self.add_error(None, duplicate_refusal(twin).message)
        return data

    def clean_webhook_url(self) -> str:
        url: str = self.cleaned_data.get("webhook_url") or ""
        if url:
            try:
                webhook_check(url)
            except WebhookRefused as exc:
                raise forms.ValidationError(str(exc)) from exc
        return url
