"""Signing in and out: the login page (local or directory password, or the OpenID provider's
button), the OpenID Connect redirect and callback, and log-out."""

from typing import Any

from django.contrib import auth, messages
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
    OIDCLogoutView,
)

from accounts.sso.config import oidc_enabled, site_name


class LoginPage(auth_views.LoginView):
    """Django's login form, and "Sign in with <site>" when OpenID Connect is configured."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context["sso_site_name"] = site_name() if oidc_enabled() else None
        return context


class OIDCStart(OIDCAuthenticationRequestView):
    """To the provider, with state, nonce and the PKCE challenge; 404 when it is not set."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc_enabled():
            raise Http404("Single sign-on is not configured.")
        response: HttpResponse = super().get(request)
        return response


class OIDCCallback(OIDCAuthenticationCallbackView):
    """The provider's answer: signed in, or back at the login page with why not."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc_enabled():
            raise Http404("Single sign-on is not configured.")
        response: HttpResponse = super().get(request)
        return response

    def login_failure(self) -> HttpResponse:
        if self.request.user.is_authenticated:
            # A failed re-check of a signed-in session (accounts.sso.refresh): the provider
            # no longer signs the person in, so the session ends here (and its streams).
            # The library logs out only when the provider answers with an error, not when
            # its code is refused at the token endpoint.
            auth.logout(self.request)
        messages.error(
            self.request,
            f"Signing in with {site_name()} did not work: the provider refused, or your "
            "portal account is disabled. Try again, or ask the portal's administrators.",
        )
        return HttpResponseRedirect(resolve_url("login"))


class LogoutPage(OIDCLogoutView):
    """POST: ends the session (and so its live streams, monitoring.live.access); a session
    that signed in through the provider goes on to its log-out (accounts.sso.oidc)."""

    http_method_names = ["post"]
