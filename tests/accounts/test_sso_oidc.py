"""OpenID Connect log-in against a real, certified provider (oidc-provider on Node.js) whose
people and groups are a real slapd's, both started by the fixtures.

The portal's side runs in Django's test client; the provider's pages are driven with
httpx, as a browser without JavaScript would (the browser test is tests/e2e).
"""

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import ExternalIdentity
from accounts.selectors import cluster_username_for
from devtools.ldap_server import PASSWORDS
from devtools.openid_provider import OpenIDProvider
from projects.models import Membership
from tests.accounts.sso_flow import at_provider, sign_in, signed_in_as
from tests.fixtures.sso import SITE
from tests.helpers import PASSWORD

pytestmark = pytest.mark.django_db


def test_the_login_page_offers_the_provider_only_once_configured(settings, oidc_on) -> None:
    page = Client().get("/login/")
    assert f"Sign in with {SITE}" in page.content.decode()
    settings.OIDC_RP_CLIENT_ID = ""
    page = Client().get("/login/")
    assert "Sign in with" not in page.content.decode()
    assert 'name="password"' in page.content.decode()  # local passwords stay
    assert Client().get("/sso/oidc/start/").status_code == 404
    assert Client().get("/sso/oidc/callback/").status_code == 404


def test_the_start_asks_for_the_code_with_pkce(oidc_on: OpenIDProvider) -> None:
    start = Client().get("/sso/oidc/start/")
    query = parse_qs(urlsplit(start["Location"]).query)
    assert start["Location"].startswith(f"{oidc_on.issuer}/auth?")
    assert query["response_type"] == ["code"]
    assert query["code_challenge_method"] == ["S256"]
    assert len(query["code_challenge"][0]) == 43  # base64url of a SHA-256
    assert query["redirect_uri"] == ["http://testserver/sso/oidc/callback/"]
    assert set(query["scope"][0].split()) == {"openid", "email", "profile", "groups"}


def test_an_ldap_person_signs_in_through_the_provider(oidc_on: OpenIDProvider) -> None:
    client = Client()
    answer = sign_in(client, "bob", PASSWORDS["bob"], next_url="/jobs/")
    assert (answer.status_code, answer["Location"]) == (302, "/jobs/")
    bob = signed_in_as(client)
    assert bob is not None and bob.username == "bob" and bob.email == "bob@example.org"
    identity = ExternalIdentity.objects.get(user=bob)
    assert identity.issuer == oidc_on.issuer
    assert len(identity.subject) == 36  # the directory's entryUUID, as the provider's sub
    assert sorted(identity.groups) == ["hpc-staff", "ml-leads", "ml-team"]
    assert cluster_username_for(bob) == "bob"
    assert bob.is_staff
    assert Membership.objects.get(user=bob, project__slug="vision").role == "member"
    # Again: the same portal user.
    again = Client()
    sign_in(again, "bob", PASSWORDS["bob"])
    assert signed_in_as(again) == bob


def test_the_provider_refuses_a_wrong_password(oidc_on: OpenIDProvider) -> None:
    start = Client().get("/sso/oidc/start/")
    page = at_provider(start["Location"], "alice", "not-her-password")
    assert isinstance(page, httpx.Response) and "Wrong user name or password." in page.text
    assert not ExternalIdentity.objects.exists()


def test_the_provider_refuses_a_request_without_pkce(settings, oidc_on: OpenIDProvider) -> None:
    settings.OIDC_USE_PKCE = False
    client = Client()
    start = client.get("/sso/oidc/start/")
    assert "code_challenge" not in start["Location"]
    with httpx.Client(timeout=30) as browser:
        refusal = browser.get(start["Location"])
    back = urlsplit(refusal.headers["location"])
    assert parse_qs(back.query)["error"] == ["invalid_request"]
    assert "requires PKCE" in parse_qs(back.query)["error_description"][0]
    answer = client.get(f"{back.path}?{back.query}")
    assert answer["Location"] == "/login/" and signed_in_as(client) is None


def test_a_person_disabled_in_the_portal_is_refused(oidc_on: OpenIDProvider) -> None:
    client = Client()
    sign_in(client, "alice", PASSWORDS["alice"])
    alice = signed_in_as(client)
    assert alice is not None
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert signed_in_as(client) is None  # the open session is over too
    again = Client()
    answer = sign_in(again, "alice", PASSWORDS["alice"])
    assert answer["Location"] == "/login/" and signed_in_as(again) is None
    page = again.get("/login/").content.decode()
    assert f"Signing in with {SITE} did not work" in page


def test_a_token_from_another_issuer_is_refused(settings, oidc_on: OpenIDProvider) -> None:
    settings.OIDC_OP_ISSUER = "https://another.example.org"
    client = Client()
    answer = sign_in(client, "alice", PASSWORDS["alice"])
    assert answer["Location"] == "/login/" and signed_in_as(client) is None
    assert not ExternalIdentity.objects.exists()


def test_log_out_ends_the_session_and_goes_on_to_the_provider(oidc_on: OpenIDProvider) -> None:
    client = Client()
    sign_in(client, "alice", PASSWORDS["alice"])
    assert signed_in_as(client) is not None
    out = client.post("/logout/")
    assert signed_in_as(client) is None
    target = urlsplit(out["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{oidc_on.issuer}/session/end"
    query = parse_qs(target.query)
    assert query["post_logout_redirect_uri"] == ["http://testserver/login/"]
    assert query["client_id"] == ["portal"] and query["id_token_hint"]
    # The provider takes the request (the browser test answers its question).
    with httpx.Client(timeout=30) as browser:
        taken = browser.get(out["Location"])
        assert taken.status_code == 200 and "Sign-in error" not in taken.text


def test_log_out_of_a_local_session_stays_in_the_portal(oidc_on, member: User) -> None:
    client = Client()
    assert client.post("/login/", {"username": "mia", "password": PASSWORD}).status_code == 302
    assert signed_in_as(client) == member
    out = client.post("/logout/")
    assert out["Location"] == "/login/" and signed_in_as(client) is None
    assert client.get("/logout/").status_code == 405  # a link cannot log anyone out
