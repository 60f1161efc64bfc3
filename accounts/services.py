"""Writes on personal tokens: issue and revoke."""

from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import PersonalToken
from accounts.tokens import token_digest, token_new
from portal_lib.errors import PortalError
from portal_lib.viewers import viewer_access_changed

MAX_TOKEN_DAYS = 366
DEFAULT_TOKEN_DAYS = 90
PREFIX_TRIES = 5


class TokenError(PortalError):
    """A token request the user can fix; the message says what to change."""


@dataclass(frozen=True)
class IssuedToken:
    token: PersonalToken
    text: str  # shown once, never stored


@transaction.atomic
def token_issue(
    *, user: User, name: str, scope: str, days: int = DEFAULT_TOKEN_DAYS
) -> IssuedToken:
    """A new token for the user; its text is returned here and nowhere else."""
    name = name.strip()
    if not name or len(name) > 100:
        raise TokenError("Name the token (at most 100 characters), e.g. 'laptop notebook'.")
    if scope not in PersonalToken.Scope.values:
        raise TokenError(f"Choose the scope {' or '.join(PersonalToken.Scope.values)}.")
    if not 1 <= days <= MAX_TOKEN_DAYS:
        raise TokenError(f"Let the token expire in 1 to {MAX_TOKEN_DAYS} days.")
    for _ in range(PREFIX_TRIES):
        new = token_new()
        try:
            with transaction.atomic():
                token = PersonalToken.objects.create(
                    user=user,
                    name=name,
                    prefix=new.prefix,
                    digest=token_digest(new.secret),
                    scope=scope,
                    expires_at=timezone.now() + timedelta(days=days),
                )
        except IntegrityError:
            continue  # the prefix is taken: draw another
        return IssuedToken(token=token, text=new.text)
    raise RuntimeError("no free token prefix after several draws")


def token_revoke(*, user: User, token_id: int) -> bool:
    """Revoke one of the user's own tokens; False when there is no such live token."""
    updated = PersonalToken.objects.filter(
        pk=token_id, user_id=user.pk, revoked_at__isnull=True
    ).update(revoked_at=timezone.now())
    if updated:
        # Streams opened with it end within seconds (monitoring.live.access).
        user_id = user.pk
        transaction.on_commit(
            lambda: viewer_access_changed.send(sender=PersonalToken, user_id=user_id)
        )
    return updated == 1
