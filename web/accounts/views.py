"""The user's token page: list, create (the token is shown once), revoke."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.selectors import tokens_of
from accounts.services import TokenError, token_issue, token_revoke
from portal_lib.errors import form_add_error
from web.accounts.forms import TokenForm
from web.accounts.snippet import snippet_for
from web.auth import request_user


@login_required
def token_page(request: HttpRequest) -> HttpResponse:
    """GET lists the user's tokens; POST makes one and shows its text this once."""
    user = request_user(request)
    new_token = None
    if request.method == "POST":
        form = TokenForm(request.POST)
        if form.is_valid():
            try:
                issued = token_issue(
                    user=user,
                    name=form.cleaned_data["name"],
                    scope=form.cleaned_data["scope"],
                    days=form.cleaned_data["days"],
                )
            except TokenError as exc:
                form_add_error(form, exc)
            else:
                new_token = issued
                form = TokenForm()
    else:
        form = TokenForm()
    response = render(
        request,
        "accounts/tokens.html",
        {
            "form": form,
            "tokens": list(tokens_of(user=user)),
            "new_token": new_token,
            "portal_url": request.build_absolute_uri("/").rstrip("/"),
            "snippet": snippet_for(user=user),
        },
    )
    # The page that shows a token's text must not be kept by any cache.
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    user = request_user(request)
    if token_revoke(user=user, token_id=token_id):
        messages.success(request, "Token revoked: requests with it are refused from now on.")
    else:
        messages.error(request, "No such live token of yours.")
    return HttpResponseRedirect(reverse("account-tokens"))
