"""The user's cluster logins, and the self-service key page: make a key, paste its one
authorized_keys line on the cluster, test it. The private key is never shown."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from clusters.certificates.installed import (
    InstalledKeyError,
    KeyTest,
    authorized_keys_line,
    install_command,
    installed_key_make,
    login_test,
    logins_of,
)
from clusters.models import Authentication, ClusterAccount
from web.auth import request_user


@login_required
@require_GET
def login_list(request: HttpRequest) -> HttpResponse:
    """The signed-in user's own accounts on clusters and how the portal logs in to each."""
    accounts = list(logins_of(user_id=request_user(request).pk))
    return render(request, "keys/logins.html", {"accounts": accounts})


def _own_account(request: HttpRequest, cluster: str) -> ClusterAccount:
    account = logins_of(user_id=request_user(request).pk).filter(cluster__name=cluster).first()
    if account is None:
        raise Http404("You have no login of your own on that cluster.")
    return account


@login_required
def login_key(request: HttpRequest, cluster: str) -> HttpResponse:
    """GET shows the line to paste; POST `make` makes a (new) key; POST `test` logs in as
    the account its way (the key, or a certificate) and says how it went."""
    account = _own_account(request, cluster)
    test: KeyTest | None = None
    error = ""
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "make":
            try:
                installed_key_make(account=account)
            except InstalledKeyError as exc:
                error = str(exc)
            else:
                return HttpResponseRedirect(reverse("login-key", args=[cluster]))
        elif action == "test":
            test = login_test(account=account)
        else:
            return HttpResponse("Unknown action: send action=make or action=test.", status=400)
    line = authorized_keys_line(account=account)
    return render(
        request,
        "keys/key.html",
        {
            "account": account,
            "installs_key": account.authentication == Authentication.INSTALLED_KEY,
            "line": line,
            "command": install_command(line=line) if line else "",
            "test": test,
            "error": error,
        },
        status=400 if error else 200,
    )
