"""A session signed in through the OpenID provider is checked with it again, every
OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS: mozilla-django-oidc's SessionRefresh.

At the first page after the interval the browser is sent to the provider with
`prompt=none`: a person it still signs in comes straight back and carries on (their name,
groups and memberships read again); one it no longer signs in (disabled, or gone from the
directory it reads) comes back with an error, or a code the token endpoint refuses, and the
callback ends the session (web.accounts.sessions.OIDCCallback).

The library re-checks only on a GET: a form sent (or an API call made) on a session whose
check is due would go through unchecked. Here those fail closed: refused with 403, the
session kept for the page load that checks it. The provider's refresh tokens are not used:
the tests' provider (like many site setups) issues none to this client.
"""

import time
from typing import Any

from django.contrib.auth import BACKEND_SESSION_KEY
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.urls import NoReverseMatch, reverse
from django.utils.functional import cached_property
from django.utils.module_loading import import_string
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.middleware import SessionRefresh

from accounts.sso.config import oidc_enabled, site_name

# Where the library keeps when the session's check is next due (seconds since the epoch).
EXPIRY_KEY = "oidc_id_token_expiration"
# The REST API's paths (web.urls): answered in JSON, never redirected to the provider.
API_PREFIX = "/api/"
# Never checked: signing in and out, and the callback that ends a check.
EXEMPT_NAMES = ("login", "logout", "oidc_authentication_init", "oidc_authentication_callback")


class ProviderSessionCheck(SessionRefresh):
    """SessionRefresh that fails closed for what it cannot redirect (see the module)."""

    @cached_property
    def exempt_urls(self) -> set[str]:
        # The library's list names its own log-out view, which this portal replaces.
        urls = {url for url in self.OIDC_EXEMPT_URLS if isinstance(url, str)}
        for name in EXEMPT_NAMES:
            try:
                urls.add(reverse(name))
            except NoReverseMatch:
                continue
        return {url if url.startswith("/") else reverse(url) for url in urls}

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if not oidc_enabled() or not self._check_due(request):
            return None
        is_api = request.path.startswith(API_PREFIX)
        is_xhr = request.headers.get("x-requested-with") == "XMLHttpRequest"
        if request.method == "GET" and not is_api:
            # To the provider with prompt=none (an XHR gets 403 with the URL to follow).
            response: HttpResponse | None = super().process_request(request)
            return response
        message = (
            f"Your sign-in is checked again with {site_name()} from time to time, and this "
            "request came after that check was due: reload the page (which checks it), then "
            "try again."
        )
        if is_api or is_xhr:
            return JsonResponse({"detail": message}, status=403)
        return HttpResponseForbidden(message, content_type="text/plain; charset=utf-8")

    def _check_due(self, request: HttpRequest) -> bool:
        """A session signed in through the provider, on a checked path, past its interval."""
        if not request.user.is_authenticated:
            return False
        backend = request.session.get(BACKEND_SESSION_KEY)
        if not backend or not _is_provider_backend(backend):
            return False
        if request.path in self.exempt_urls or any(
            pattern.match(request.path) for pattern in self.exempt_url_patterns
        ):
            return False
        return float(request.session.get(EXPIRY_KEY, 0)) <= time.time()


def _is_provider_backend(path: str) -> bool:
    try:
        backend: Any = import_string(path)
    except ImportError:
        return False
    return isinstance(backend, type) and issubclass(backend, OIDCAuthenticationBackend)
