"""Writes of a project's idle-GPU policy from the staff overview, logged where the admin's
own edits are (the project's history in the Django admin)."""

from datetime import timedelta

from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import User
from django.db import transaction

from projects.models import IdlePolicy, Project


def _log(*, user: User, project: Project, message: str) -> None:
    LogEntry.objects.log_actions(
        user_id=user.pk,
        queryset=[project],
        action_flag=CHANGE,
        change_message=message,
        single_object=True,
    )


@transaction.atomic
def idle_policy_set(
    *,
    project: Project,
    threshold_percent: int,
    warn_after: timedelta,
    cancel_after: timedelta | None,
    user: User,
) -> IdlePolicy:
    """Create or change the project's policy; ValidationError (naming the field) if the
    model's validators refuse a value, and then nothing changes."""
    policy = IdlePolicy.objects.select_for_update().filter(project=project).first()
    policy = policy or IdlePolicy(project=project)
    policy.threshold_percent = threshold_percent
    policy.warn_after = warn_after
    policy.cancel_after = cancel_after
    policy.full_clean()
    policy.save()
    _log(user=user, project=project, message=f"Idle policy set on the overview: {policy}.")
    return policy


@transaction.atomic
def idle_policy_remove(*, project: Project, user: User) -> bool:
    """No more warnings or cancels for idle GPUs in the project; False if it had no policy."""
    removed, _ = IdlePolicy.objects.filter(project=project).delete()
    if removed:
        _log(user=user, project=project, message="Idle policy removed on the overview.")
    return bool(removed)
