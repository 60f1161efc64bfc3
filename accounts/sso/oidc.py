"""OpenID Connect log-in: the authorization code flow with PKCE, by mozilla-django-oidc.

mozilla-django-oidc (Mozilla's, maintained since 2016, used by their own sites) does the
flow: state, nonce, the PKCE verifier kept in the session, the token request, the ID
token's signature checked against the provider's keys. It is small enough to read whole,
and it leaves who the user is to us: here the issuer and subject (never the e-mail, its
default, which a provider may reuse or let a user change), checks it does not make
(the token's issuer and audience, userinfo's subject), and a disabled user refused.
"""

import logging
from typing import Any
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest
from django.shortcuts import resolve_url
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from accounts.sso.claims import ExternalProfile, profile_from_claims
from accounts.sso.config import oidc_enabled

logger = logging.getLogger(__name__)

# Where mozilla-django-oidc keeps the ID token (OIDC_STORE_ID_TOKEN): only a session that
# signed in through the provider has one.
ID_TOKEN_KEY = "oidc_id_token"  # noqa: S105 - a session key, not a secret


class PortalOIDCBackend(OIDCAuthenticationBackend):
    """Answers only once OpenID Connect is configured; `sign_in` makes the portal user."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django makes its backends at every log-in: settings are read then, and an
        # unconfigured provider is no error (mozilla-django-oidc's own __init__ raises).
        self.UserModel = get_user_model()
        self.enabled = oidc_enabled()
        if self.enabled:
            super().__init__(*args, **kwargs)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        if not self.enabled:
            return None
        try:
            user: User | None = super().authenticate(request, **kwargs)
        except (SuspiciousOperation, requests.RequestException) as exc:
            logger.warning("OpenID Connect sign-in refused: %s", exc)
            return None
        return user

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        payload: dict[str, Any] = super().verify_token(token, **kwargs)
        if payload.get("iss") != settings.OIDC_OP_ISSUER:
            raise SuspiciousOperation(
                f"the token's issuer {payload.get('iss')!r} is not OIDC_OP_ISSUER"
            )
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if settings.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("the token was not issued to this portal (aud)")
        return payload

    def get_or_create_user(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> User | None:
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if not isinstance(userinfo, dict) or userinfo.get("sub") != payload.get("sub"):
            # OpenID Connect Core 5.3.2: userinfo's sub must be the ID token's.
            raise SuspiciousOperation("userinfo is not the ID token's subject")
        try:
            profile = profile_from_claims(
                {**payload, **userinfo},
                issuer=settings.OIDC_OP_ISSUER,
                username_claim=settings.SSO_USERNAME_CLAIM,
                groups_claim=settings.SSO_GROUPS_CLAIM,
            )
        except ValueError as exc:
            raise SuspiciousOperation(str(exc)) from None
        return self.sign_in(profile)

    def sign_in(self, profile: ExternalProfile) -> User | None:
        """The portal user for the profile; None refuses the sign-in."""
        raise NotImplementedError

    def get_user(self, user_id: int) -> User | None:
        # Every request of the session: a user disabled since is signed out here.
        return User.objects.filter(pk=user_id, is_active=True).first()


def provider_logout_url(request: HttpRequest) -> str:
    """Where log-out sends the browser (OIDC_OP_LOGOUT_URL_METHOD): the provider's
    end_session_endpoint for a session that signed in there, else the login page."""
    login = resolve_url(settings.LOGOUT_REDIRECT_URL)
    id_token = request.session.get(ID_TOKEN_KEY)
    endpoint = settings.OIDC_OP_END_SESSION_ENDPOINT
    if not (oidc_enabled() and endpoint and id_token):
        return login
    query = urlencode(
        {
            "id_token_hint": id_token,
            "client_id": settings.OIDC_RP_CLIENT_ID,
            "post_logout_redirect_uri": request.build_absolute_uri(login),
        }
    )
    return f"{endpoint}?{query}"


def not_a_password_guess(request: HttpRequest | None, credentials: dict[str, Any] | None) -> bool:
    """AXES_WHITELIST_CALLABLE: a sign-in without a user name is the OpenID callback's code
    exchange, no password guess; django-axes neither counts nor refuses it.

    Counted, five failed callbacks from one address (a lab behind one NAT, a provider's
    bad minute) locked every OpenID sign-in from there out; the provider throttles its
    own password form.
    """
    return not (credentials or {}).get("username")
