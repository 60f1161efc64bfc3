"""Taking a portal user's access away and giving it back, each with its audit row.

An inactive portal user is refused everywhere through what exists: their sessions end at
their next request, their API tokens and live streams stop, and the worker signs no
certificate and opens no connection as them (docs/sso.md, "When access ends"). What is
added here is who did it and why (AccessChange), so that a sign-in readmits only a person
the directory sweep disabled, never one an admin did.
"""

import logging
from collections.abc import Mapping

from django.contrib.auth.models import User
from django.db import transaction

from accounts.models import AccessChange
from portal_lib.viewers import viewer_access_changed

logger = logging.getLogger(__name__)

REASON_MAX = 300


def _streams_recheck(user_id: int) -> None:
    # After the commit: a stream that re-checks sooner would still see the user active.
    transaction.on_commit(lambda: viewer_access_changed.send(sender=AccessChange, user_id=user_id))


@transaction.atomic
def access_revoke_by_directory(*, reasons: Mapping[int, str]) -> list[int]:
    """Disable the still-active users among `reasons` (user id -> why), recording that the
    directory sweep did it; the ids it disabled."""
    if not reasons:
        return []
    active = list(
        User.objects.select_for_update()
        .filter(pk__in=list(reasons), is_active=True)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if not active:
        return []
    User.objects.filter(pk__in=active).update(is_active=False)
    AccessChange.objects.bulk_create(
        AccessChange(
            user_id=user_id,
            active=False,
            source=AccessChange.Source.DIRECTORY,
            reason=reasons[user_id][:REASON_MAX],
        )
        for user_id in active
    )
    for user_id in active:
        logger.warning(
            "portal user %s disabled by the directory sweep: %s", user_id, reasons[user_id]
        )
        _streams_recheck(user_id)
    return active


def disabled_by_directory(*, user: User) -> bool:
    """Whether the user is inactive because the directory sweep disabled them (and no admin
    changed their access since)."""
    if user.is_active:
        return False
    latest = AccessChange.objects.filter(user_id=user.pk).order_by("-at", "-id").first()
    return (
        latest is not None and not latest.active and latest.source == AccessChange.Source.DIRECTORY
    )


def access_readmit_at_sign_in(*, user: User, issuer: str) -> None:
    """Give access back to a person the sweep disabled who signed in again (the caller holds
    their identity's row lock, and has checked disabled_by_directory)."""
    User.objects.filter(pk=user.pk).update(is_active=True)
    user.is_active = True
    AccessChange.objects.create(
        user=user,
        active=True,
        source=AccessChange.Source.SIGN_IN,
        reason=f"signed in again through {issuer}: the directory has them again"[:REASON_MAX],
    )
    logger.info("portal user %s readmitted at a sign-in through %s", user, issuer)


def access_changed_by_admin(*, user: User, admin: User | None) -> None:
    """Record an admin's ticking or unticking of "active" (the admin's user form)."""
    verb = "enabled" if user.is_active else "disabled"
    AccessChange.objects.create(
        user=user,
        active=user.is_active,
        source=AccessChange.Source.ADMIN,
        admin=admin,
        reason=f"{verb} in the admin by {admin or 'an admin'}"[:REASON_MAX],
    )
    if not user.is_active:
        _streams_recheck(user.pk)
