"""What a site sets for single sign-on: the check names what is missing, production's CSP
lets log-out reach the provider, and the identity rules behind `cluster_username_for`."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.test import RequestFactory

from accounts.selectors import cluster_username_for
from accounts.sso.checks import sso_settings_check
from accounts.sso.claims import ExternalProfile
from accounts.sso.services import identity_sign_in

ROOT = Path(__file__).resolve().parents[2]


def test_nothing_set_is_no_error(settings) -> None:
    settings.OIDC_RP_CLIENT_ID = settings.LDAP_SERVER_URL = settings.SSO_GROUP_PROJECTS = ""
    assert sso_settings_check() == []


def test_a_half_set_provider_names_what_is_missing(settings) -> None:
    settings.OIDC_RP_CLIENT_ID = "portal"
    settings.OIDC_OP_ISSUER = "https://idp.example.org"
    settings.OIDC_OP_TOKEN_ENDPOINT = settings.OIDC_OP_USER_ENDPOINT = ""
    settings.LDAP_SERVER_URL = "ldaps://ldap.example.org"
    settings.LDAP_USER_BASE = ""
    settings.SSO_GROUP_PROJECTS = '{"ml-team": "vision"}'
    errors = {error.id: error.msg for error in sso_settings_check()}
    assert set(errors) == {"accounts.E001", "accounts.E002", "accounts.E003"}
    assert "OIDC_OP_TOKEN_ENDPOINT, OIDC_OP_USER_ENDPOINT" in errors["accounts.E001"]
    assert "LDAP_USER_BASE" in errors["accounts.E002"]
    assert 'SSO_GROUP_PROJECTS["ml-team"]' in errors["accounts.E003"]


def _production(extra: dict[str, str], code: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "REDIS", "DATA", "OIDC_", "LDAP_", "SSO_"))
    }
    env = {
        **clean,
        "DJANGO_SETTINGS_MODULE": "portal.settings.production",
        "DJANGO_SECRET_KEY": "k" * 20 + "q7Zr" * 8,
        "FIELD_ENCRYPTION_KEYS": "cGNVZ3h2dGJoWk5yWHRsR0NxbW5mV2lLb2Z5Y1l6cDc=",
        "DATABASE_URL": "postgres://portal:s3cret-db@db:5432/portal",
        "REDIS_URL": "redis://:s3cret-redis@redis:6379/0",
        **extra,
    }
    script = "import django; django.setup()\nfrom django.conf import settings as s\n" + code
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_production_lets_log_out_go_on_to_the_provider_and_nowhere_else() -> None:
    code = "print(s.CONTENT_SECURITY_POLICY['DIRECTIVES']['form-action'], s.OIDC_VERIFY_SSL)"
    plain = _production({}, code)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.split() == ["[\"'self'\"]", "True"]
    with_idp = _production(
        {
            "OIDC_OP_END_SESSION_ENDPOINT": "https://idp.example.org/realms/hpc/logout",
            "OIDC_VERIFY_SSL": "/etc/ssl/site-ca.pem",
        },
        code,
    )
    assert with_idp.returncode == 0, with_idp.stderr
    assert with_idp.stdout.split() == [
        "[\"'self'\",",
        "'https://idp.example.org']",
        "/etc/ssl/site-ca.pem",
    ]


def _profile(issuer: str, subject: str, cluster_username: str | None) -> ExternalProfile:
    return ExternalProfile(
        issuer=issuer, subject=subject, username="ada", cluster_username=cluster_username
    )


@pytest.mark.django_db
def test_the_cluster_name_is_the_last_sign_ins(member: User) -> None:
    ada = identity_sign_in(profile=_profile("https://idp", "1", "ada"), staff=None)
    assert ada is not None and cluster_username_for(ada) == "ada"
    assert cluster_username_for(member) is None  # a local account has none
    # The provider renamed her: the next sign-in's name is the one.
    assert identity_sign_in(profile=_profile("https://idp", "1", "ada2"), staff=None) == ada
    assert cluster_username_for(ada) == "ada2"
    # A name no cluster would take is kept as none, never passed on.
    identity_sign_in(profile=_profile("https://idp", "1", None), staff=None)
    assert cluster_username_for(ada) is None
    assert not ada.is_staff  # staff=None leaves it as the admin set it


@pytest.mark.django_db
def test_the_admin_lists_identities_in_fixed_queries_and_only_to_staff(
    client, staff: User, member: User, django_assert_max_num_queries
) -> None:
    for n in range(30):
        identity_sign_in(profile=_profile("https://idp", str(n), f"user{n}"), staff=None)
    url = "/admin/accounts/externalidentity/"
    client.force_login(member)
    assert client.get(url).status_code == 302  # not staff: to the admin's log-in
    client.force_login(staff)
    # session, user, count x2, the page (user joined), the issuer filter's choices
    with django_assert_max_num_queries(8):
        response = client.get(url)
    assert response.status_code == 200 and b"user29" in response.content
    assert client.get(f"{url}add/").status_code == 403  # each sign-in writes them


@pytest.mark.django_db
def test_failed_code_exchanges_lock_no_address_out_but_passwords_still_count(settings) -> None:
    settings.OIDC_RP_CLIENT_ID = "portal"
    for name in (
        "OIDC_OP_ISSUER",
        "OIDC_OP_AUTHORIZATION_ENDPOINT",
        "OIDC_OP_TOKEN_ENDPOINT",
        "OIDC_OP_USER_ENDPOINT",
        "OIDC_OP_JWKS_ENDPOINT",
    ):
        setattr(settings, name, "http://127.0.0.1:9/nothing-listens")
    for _ in range(settings.AXES_FAILURE_LIMIT + 2):
        request = RequestFactory().get("/sso/oidc/callback/", {"code": "c", "state": "s"})
        request.session = SessionStore()
        assert authenticate(request=request, nonce="n", code_verifier="v") is None
    assert not AccessAttempt.objects.exists()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        request = RequestFactory().post("/login/")
        assert authenticate(request=request, username="mia", password="guess") is None
    assert AccessAttempt.objects.get(username="mia").failures_since_start == 5
