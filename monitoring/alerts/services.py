"""Writes on a user's alerts and rules: read marks, a new rule, a deleted rule."""

from django.contrib.auth.models import User
from django.utils import timezone

from monitoring.models import Alert, AlertRule


def alerts_mark_read(*, user: User, alert_id: int | None = None) -> int:
    """Mark one of the user's alerts read (`alert_id`), or all of them; how many changed."""
    unread = Alert.objects.filter(user=user, read_at=None)
    if alert_id is not None:
        unread = unread.filter(pk=alert_id)
    return unread.update(read_at=timezone.now())


def alert_rule_add(*, rule: AlertRule, owner: User) -> AlertRule:
    """Store a rule the form checked, as the owner's."""
    rule.owner = owner
    rule.save()
    return rule


def alert_rule_delete(*, owner: User, rule_id: int) -> bool:
    """Delete one of the owner's rules; False when the owner has no such rule."""
    deleted, _ = AlertRule.objects.filter(owner=owner, pk=rule_id).delete()
    return bool(deleted)
