"""`Authorization: Bearer <token>` for the API, and the checks every use of a token shares."""

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache.backends.locmem import LocMemCache
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from accounts.models import PersonalToken
from accounts.tokens import digest_matches, token_parse
from portal_lib.cache import CACHE_DOWN

logger = logging.getLogger(__name__)

# This process's own counts, used while the shared cache (Redis) cannot be reached: the
# rate then holds per process instead of failing every request with a 500.
_LOCAL_COUNTS = LocMemCache("portal-throttle-fallback", {})

# Writing last_used_at on every request would make each read a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)
NEW_TOKEN_HINT = "make a new one at /account/tokens/"  # noqa: S105 - a message


def bearer_token(header: bytes) -> str | None:
    """The token of an `Authorization: Bearer ...` header; None for any other scheme."""
    parts = header.split()
    if not parts or parts[0].lower() != b"bearer":
        return None
    if len(parts) != 2:
        raise AuthenticationFailed("Send the header as 'Authorization: Bearer <token>'.")
    try:
        return parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise AuthenticationFailed("A token has only ASCII characters.") from None


def token_authenticate(text: str) -> tuple[AbstractBaseUser, PersonalToken]:
    """The user and token a token's text stands for, or AuthenticationFailed saying why not."""
    parsed = token_parse(text)
    if parsed is None:
        raise AuthenticationFailed(f"This is not a portal token; {NEW_TOKEN_HINT}.")
    prefix, secret = parsed
    token = PersonalToken.objects.select_related("user").filter(prefix=prefix).first()
    if token is None or not digest_matches(secret, token.digest):
        raise AuthenticationFailed(f"Unknown token; {NEW_TOKEN_HINT}.")
    if token.revoked_at is not None:
        raise AuthenticationFailed(f"This token was revoked; {NEW_TOKEN_HINT}.")
    now = timezone.now()
    if token.expires_at <= now:
        raise AuthenticationFailed(f"This token expired; {NEW_TOKEN_HINT}.")
    if not token.user.is_active:
        raise AuthenticationFailed("This token's user is disabled.")
    if token.last_used_at is None or token.last_used_at < now - LAST_USED_RESOLUTION:
        PersonalToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user, token


class PersonalTokenAuthentication(BaseAuthentication):
    """A personal access token; a request without one falls through to the session."""

    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, PersonalToken] | None:
        text = bearer_token(get_authorization_header(request))
        if text is None:
            return None
        return token_authenticate(text)

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) to a request that is not signed in.
        return 'Bearer realm="api"'


class TokenScopePermission(BasePermission):
    """A read-scoped token reads; only a submit-scoped one (or the session) writes."""

    message = "This token can only read: use a token with the submit scope to change anything."

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.method in SAFE_METHODS or not isinstance(request.auth, PersonalToken):
            return True
        return request.auth.can_submit


class TokenRateThrottle(SimpleRateThrottle):
    """Requests per token (per user for the session, per address for the anonymous)."""

    scope = "token"

    def get_rate(self) -> str | None:
        # Read per request, so a setting changed in a test or at run time applies.
        rates = settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES", {})
        rate = rates.get(self.scope) if isinstance(rates, dict) else None
        return str(rate) if rate else None

    def allow_request(self, request: Request, view: Any) -> bool:
        try:
            return super().allow_request(request, view)
        except CACHE_DOWN as exc:
            logger.warning("throttle cache unreachable (%s): counting in this process", exc)
            self.cache = _LOCAL_COUNTS
            return super().allow_request(request, view)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if isinstance(request.auth, PersonalToken):
            ident = f"token-{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            ident = f"addr-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class IdentityThrottle(TokenRateThrottle):
    """The same per-token budget, for views outside DRF (the live streams)."""

    def __init__(self, *, user_id: int, token: PersonalToken | None) -> None:
        super().__init__()
        self.ident = f"token-{token.pk}" if token is not None else f"user-{user_id}"

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.ident}

    def allow(self) -> bool:
        """Count one request; False once the budget is spent (`wait()` says how long)."""
        # The key depends on neither the request nor the view.
        return self.allow_request(None, None)  # type: ignore[arg-type]
