"""A session signed in through the OpenID provider is checked with it again after
OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS (prompt=none, accounts.sso.refresh): kept while the
provider still signs the person in, ended once they are gone from the directory it reads;
a form or an API call on a session whose check is due is refused.

The real provider on a real slapd (tests.fixtures.sso). The provider's own session lives in
one httpx client's cookies, as in a browser; the check comes due by moving the session's
stamp, not by waiting.
"""

import re
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest
from django.test import Client

from accounts.models import PersonalToken
from devtools.ldap_server import Directory
from devtools.openid_provider import OpenIDProvider
from tests.accounts.sso_directory import DORA_PASSWORD, directory_admin, dora_in
from tests.accounts.sso_flow import signed_in_as

pytestmark = pytest.mark.django_db

INTERVAL = 60


@pytest.fixture
def dora(directory: Directory) -> Iterator[str]:
    with dora_in(directory) as dn:
        yield dn


@pytest.fixture
def checked(settings, oidc_on: OpenIDProvider) -> OpenIDProvider:
    settings.OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS = INTERVAL
    return oidc_on


@pytest.fixture
def browser() -> Iterator[httpx.Client]:
    """The browser's side at the provider: its cookies keep the provider's session."""
    with httpx.Client(timeout=30) as client:
        yield client


def _to_portal(browser: httpx.Client, url: str) -> str:
    """Follow the provider's redirects (and its log-in form, filled by `form`) back to the
    portal; the URL the provider sends the browser to."""
    answer = browser.get(url)
    while answer.status_code in (302, 303):
        location = urljoin(url, answer.headers["location"])
        if urlsplit(location).netloc == "testserver":
            return location
        answer = browser.get(location)
    raise AssertionError(f"the provider did not send the browser back: {answer.text[:500]}")


def _sign_in(client: Client, browser: httpx.Client, username: str, password: str) -> None:
    start = client.get("/sso/oidc/start/")
    answer = browser.get(start["Location"])
    while answer.status_code in (302, 303) and "/interaction/" in answer.headers["location"]:
        answer = browser.get(urljoin(start["Location"], answer.headers["location"]))
    action = re.search(r'action="([^"]+)"', answer.text)
    assert action is not None, answer.text
    answer = browser.post(
        urljoin(start["Location"], action.group(1)),
        data={"username": username, "password": password},
    )
    assert answer.status_code in (302, 303), answer.text
    back = _to_portal(browser, urljoin(start["Location"], answer.headers["location"]))
    parts = urlsplit(back)
    done = client.get(f"{parts.path}?{parts.query}")
    assert done.status_code == 302 and done["Location"] == "/", done


def _make_check_due(client: Client) -> None:
    session = client.session
    session["oidc_id_token_expiration"] = time.time() - 1
    session.save()


def _recheck(client: Client, browser: httpx.Client, path: str = "/"):
    """A page load on a session whose check is due: to the provider and back; the portal's
    answer to the provider's return."""
    page = client.get(path)
    assert page.status_code == 302, page
    query = parse_qs(urlsplit(page["Location"]).query)
    assert query["prompt"] == ["none"] and query["code_challenge_method"] == ["S256"]
    back = urlsplit(_to_portal(browser, page["Location"]))
    assert back.path == "/sso/oidc/callback/", back
    return client.get(f"{back.path}?{back.query}")


def test_a_session_is_not_checked_before_its_interval(checked, dora, browser) -> None:
    client = Client()
    _sign_in(client, browser, "dora", DORA_PASSWORD)
    due = client.session["oidc_id_token_expiration"]
    assert time.time() < due <= time.time() + INTERVAL
    assert client.get("/").status_code == 200


def test_a_person_the_provider_still_signs_in_keeps_the_session(checked, dora, browser) -> None:
    client = Client()
    _sign_in(client, browser, "dora", DORA_PASSWORD)
    dora_user = signed_in_as(client)
    assert dora_user is not None
    _make_check_due(client)

    answer = _recheck(client, browser, "/jobs/")

    assert (answer.status_code, answer["Location"]) == (302, "/jobs/")
    assert signed_in_as(client) == dora_user
    assert client.session["oidc_id_token_expiration"] > time.time()


def test_a_person_gone_from_the_directory_loses_the_session_at_the_check(
    checked, directory: Directory, dora: str, browser
) -> None:
    client = Client()
    _sign_in(client, browser, "dora", DORA_PASSWORD)
    assert signed_in_as(client) is not None
    with directory_admin(directory) as admin:
        assert admin.delete(dora), admin.result
    # Before the check is due, the session still stands: the interval is the bound.
    assert client.get("/").status_code == 200
    _make_check_due(client)

    answer = _recheck(client, browser)

    assert (answer.status_code, answer["Location"]) == (302, "/login/")
    assert signed_in_as(client) is None
    page = client.get("/jobs/")
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_a_form_or_an_api_call_on_a_due_session_is_refused(checked, dora, browser) -> None:
    client = Client()
    _sign_in(client, browser, "dora", DORA_PASSWORD)
    _make_check_due(client)

    form = client.post("/account/tokens/", {"name": "laptop", "scope": "read", "days": "30"})
    api = client.get("/api/v1/jobs/")
    xhr = client.post("/account/tokens/", {"name": "x"}, HTTP_X_REQUESTED_WITH="XMLHttpRequest")

    assert form.status_code == 403 and b"reload the page" in form.content
    assert api.status_code == 403 and "reload the page" in api.json()["detail"]
    assert xhr.status_code == 403 and "reload the page" in xhr.json()["detail"]
    assert not PersonalToken.objects.exists()
    # Log-out is never held back.
    assert client.post("/logout/").status_code == 302
    assert signed_in_as(client) is None


def test_a_password_session_is_not_sent_to_the_provider(checked, member) -> None:
    client = Client()
    client.force_login(member, backend="django.contrib.auth.backends.ModelBackend")
    assert client.get("/").status_code == 200
    assert client.post("/account/tokens/", {"name": "laptop", "scope": "read"}).status_code != 403
