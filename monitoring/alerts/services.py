"""Writes on a user's alerts and rules: read marks, a new rule, a deleted rule."""

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from monitoring.alerts.rules import rule_settings, rule_settings_text
from monitoring.models import Alert, AlertRule
from portal_lib.errors import PortalError


class DuplicateRule(PortalError):
    """The owner has a rule that fires on the same thing for the same jobs already."""

    status = 409
    code = "duplicate_rule"


def alerts_mark_read(*, user: User, alert_id: int | None = None) -> int:
    """Mark one of the user's alerts read (`alert_id`), or all of them; how many changed."""
    unread = Alert.objects.filter(user=user, read_at=None)
    if alert_id is not None:
        unread = unread.filter(pk=alert_id)
    return unread.update(read_at=timezone.now())


def alert_rule_twin(*, owner: User, rule: AlertRule) -> AlertRule | None:
    """The owner's rule that fires exactly when `rule` would, for the same jobs, if any.

    Alike in kind, scope and the settings that kind reads (rule_settings): a "Job ended"
    rule's series or a bound left in a hidden field makes no second rule, and two such
    rules would deliver every alert twice. How each tells (portal, mail, webhook) is not
    compared: one rule tells every way it names.
    """
    settings = rule_settings(rule)
    same = AlertRule.objects.filter(owner=owner, kind=rule.kind, project=rule.project)
    return next(
        (r for r in same.exclude(pk=rule.pk).order_by("pk") if rule_settings(r) == settings),
        None,
    )


def rule_words(rule: AlertRule) -> str:
    """A rule as its owner would name it: `#3 (Loss above a bound after a step: above 2, loss)`."""
    settings = rule_settings(rule)
    parts = [str(rule.get_kind_display())]
    if detail := rule_settings_text(rule):
        parts.append(detail)
    if series := settings.get("series"):
        parts.append(f"series {series}")
    scope = f"all jobs of {rule.project.slug}" if rule.project else "your jobs"
    return f"#{rule.pk} ({', '.join(parts)}; {scope})"


def duplicate_refusal(twin: AlertRule) -> DuplicateRule:
    """What a second copy of `twin` is refused with: the rule it repeats, and what to do."""
    return DuplicateRule(
        f"You have this rule already: {rule_words(twin)}. Every alert would come twice; "
        "to be told another way, delete that rule and add it again."
    )


def alert_rule_add(*, rule: AlertRule, owner: User) -> AlertRule:
    """Store a rule the form checked, as the owner's; refused when the owner has its twin."""
    with transaction.atomic():
        # One add at a time per owner: two racing posts of one rule would both find no twin.
        User.objects.select_for_update().filter(pk=owner.pk).first()
        rule.owner = owner
        twin = alert_rule_twin(owner=owner, rule=rule)
        if twin is not None:
            raise duplicate_refusal(twin)
        rule.save()
    return rule


def alert_rule_delete(*, owner: User, rule_id: int) -> bool:
    """Delete one of the owner's rules; False when the owner has no such rule."""
    deleted, _ = AlertRule.objects.filter(owner=owner, pk=rule_id).delete()
    return bool(deleted)
