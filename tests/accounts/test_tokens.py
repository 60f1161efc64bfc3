"""Personal tokens: hashed at rest, shown once, scoped, expiring, revocable, throttled."""

import ast
import hashlib
import html as html_lib
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from accounts import services
from accounts.models import PersonalToken
from accounts.services import TokenError, token_issue, token_revoke
from accounts.tokens import NewToken, token_parse


def _api(token: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {token}"})


def test_only_a_digest_of_the_secret_is_stored(owner: User) -> None:
    issued = token_issue(user=owner, name="laptop", scope="read")
    prefix, secret = token_parse(issued.text)  # type: ignore[misc]
    row = PersonalToken.objects.get(pk=issued.token.pk)
    assert row.prefix == prefix and issued.text.startswith(f"ptk_{prefix}_")
    assert row.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(PersonalToken.objects.filter(pk=row.pk).values().first())
    # 256 random bits: two tokens never share a secret or a prefix.
    again = token_issue(user=owner, name="laptop", scope="read")
    assert again.text != issued.text and again.token.prefix != row.prefix


@pytest.mark.parametrize(
    ("name", "scope", "days", "says"),
    [
        ("", "read", 30, "Name the token"),
        ("x", "admin", 30, "scope"),
        ("x", "read", 0, "1 to 366 days"),
        ("x", "read", 367, "1 to 366 days"),
    ],
)
def test_bad_requests_say_what_to_change(owner, name, scope, days, says) -> None:
    with pytest.raises(TokenError, match=says):
        token_issue(user=owner, name=name, scope=scope, days=days)
    assert not PersonalToken.objects.exists()


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ("Bearer nonsense", "not a portal token"),
        ("Bearer ptk_deadbeefcafe_wrongsecret", "Unknown token"),
        ("Bearer a b", "Authorization: Bearer <token>"),
    ],
)
def test_bad_tokens_are_401_saying_why(owner, header: str, says: str) -> None:
    token_issue(user=owner, name="real", scope="read")
    response = Client(headers={"Authorization": header}).get("/api/v1/projects/")
    assert response.status_code == 401
    assert says in response.json()["detail"]


def test_a_right_prefix_with_a_wrong_secret_is_refused(owner) -> None:
    issued = token_issue(user=owner, name="real", scope="read")
    forged = f"ptk_{issued.token.prefix}_{'A' * 43}"
    assert _api(forged).get("/api/v1/projects/").status_code == 401


def test_expired_and_revoked_tokens_are_refused_naming_the_fix(owner) -> None:
    expired = token_issue(user=owner, name="old", scope="read", days=1)
    PersonalToken.objects.filter(pk=expired.token.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    revoked = token_issue(user=owner, name="lost", scope="read")
    assert token_revoke(user=owner, token_id=revoked.token.pk)
    for text, word in ((expired.text, "expired"), (revoked.text, "revoked")):
        response = _api(text).get("/api/v1/projects/")
        assert response.status_code == 401
        assert word in response.json()["detail"] and "/account/tokens/" in response.json()["detail"]


def test_a_disabled_user_token_is_refused(owner) -> None:
    issued = token_issue(user=owner, name="t", scope="read")
    User.objects.filter(pk=owner.pk).update(is_active=False)
    assert _api(issued.text).get("/api/v1/projects/").status_code == 401


def test_use_is_recorded_at_most_once_a_minute(owner) -> None:
    issued = token_issue(user=owner, name="t", scope="read")
    client = _api(issued.text)
    assert client.get("/api/v1/projects/").status_code == 200
    first = PersonalToken.objects.get(pk=issued.token.pk).last_used_at
    assert first is not None
    client.get("/api/v1/projects/")
    assert PersonalToken.objects.get(pk=issued.token.pk).last_used_at == first


def test_one_cannot_revoke_anothers_token(owner, member) -> None:
    issued = token_issue(user=owner, name="t", scope="read")
    assert not token_revoke(user=member, token_id=issued.token.pk)
    assert _api(issued.text).get("/api/v1/projects/").status_code == 200


def test_throttling_counts_per_token(owner, settings) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": "3/min"},
    }
    cache.clear()
    first = _api(token_issue(user=owner, name="a", scope="read").text)
    second = _api(token_issue(user=owner, name="b", scope="read").text)
    assert [first.get("/api/v1/projects/").status_code for _ in range(4)] == [200, 200, 200, 429]
    # Another token of the same user has its own budget.
    assert second.get("/api/v1/projects/").status_code == 200
    refused = first.get("/api/v1/projects/")
    assert int(refused["Retry-After"]) > 0


# --- the token page ---------------------------------------------------------------


def test_the_page_shows_a_new_token_once(client: Client, owner) -> None:
    client.force_login(owner)
    response = client.post(
        "/account/tokens/", {"name": "notebook", "scope": "submit", "days": "30"}
    )
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    token = PersonalToken.objects.get(user=owner)
    text = response.context["new_token"].text
    assert text.startswith(f"ptk_{token.prefix}_") and text in response.content.decode()
    assert token.scope == "submit"
    assert (token.expires_at - timezone.now()).days in (29, 30)
    # Never again: the list shows the name and prefix only.
    page = client.get("/account/tokens/").content.decode()
    assert "notebook" in page and token.prefix in page and text not in page
    assert _api(text).get("/api/v1/projects/").status_code == 200


def test_the_page_refuses_bad_input_creating_nothing(client: Client, owner) -> None:
    client.force_login(owner)
    response = client.post("/account/tokens/", {"name": "", "scope": "root", "days": "9999"})
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert set(errors) == {"name", "scope", "days"}
    assert not PersonalToken.objects.exists()


def test_revoke_from_the_page(client: Client, owner, member) -> None:
    issued = token_issue(user=owner, name="t", scope="read")
    client.force_login(member)
    client.post(f"/account/tokens/{issued.token.pk}/revoke/")
    assert PersonalToken.objects.get(pk=issued.token.pk).revoked_at is None
    client.force_login(owner)
    response = client.post(f"/account/tokens/{issued.token.pk}/revoke/")
    assert response.status_code == 302
    assert PersonalToken.objects.get(pk=issued.token.pk).revoked_at is not None
    assert "revoked" in client.get("/account/tokens/").content.decode()
    assert _api(issued.text).get("/api/v1/projects/").status_code == 401


def test_the_page_lists_only_ones_own_tokens(client: Client, owner, member) -> None:
    token_issue(user=owner, name="olivias-token", scope="read")
    client.force_login(member)
    assert "olivias-token" not in client.get("/account/tokens/").content.decode()


def test_the_page_needs_a_login_and_revoke_needs_post(client: Client, owner) -> None:
    issued = token_issue(user=owner, name="t", scope="read")
    assert client.get("/account/tokens/").status_code == 302
    assert client.post(f"/account/tokens/{issued.token.pk}/revoke/").status_code == 302
    assert PersonalToken.objects.get(pk=issued.token.pk).revoked_at is None
    client.force_login(owner)
    assert client.get(f"/account/tokens/{issued.token.pk}/revoke/").status_code == 405


def test_the_page_keeps_csrf(owner) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert (
        client.post("/account/tokens/", {"name": "x", "scope": "read", "days": "1"}).status_code
        == 403
    )
    assert not PersonalToken.objects.exists()


# --- manage.py issue_token ------------------------------------------------------------


def test_issue_token_command_prints_a_working_token(owner) -> None:
    out, err = StringIO(), StringIO()
    call_command(
        "issue_token", "olivia", "--scope", "submit", "--days", "7", stdout=out, stderr=err
    )
    text = out.getvalue().strip()
    token = PersonalToken.objects.get(user=owner)
    assert token.scope == "submit" and text.startswith(f"ptk_{token.prefix}_")
    assert "not shown again" in err.getvalue()
    assert _api(text).get("/api/v1/projects/").status_code == 200


def test_issue_token_command_names_the_problem(db) -> None:
    with pytest.raises(CommandError, match="No user 'nobody'"):
        call_command("issue_token", "nobody", stdout=StringIO(), stderr=StringIO())


def test_every_page_links_to_the_token_page(client: Client, owner) -> None:
    client.force_login(owner)
    assert 'href="/account/tokens/"' in client.get("/account/tokens/").content.decode()


def test_a_taken_prefix_is_drawn_again(owner, monkeypatch) -> None:
    first = token_issue(user=owner, name="first", scope="read")
    draws = iter([NewToken(first.token.prefix, "s" * 43), NewToken("0123456789ab", "t" * 43)])
    monkeypatch.setattr(services, "token_new", lambda: next(draws))
    second = token_issue(user=owner, name="second", scope="read")
    assert second.token.prefix == "0123456789ab"
    assert _api(second.text).get("/api/v1/projects/").status_code == 200
    assert _api(first.text).get("/api/v1/projects/").status_code == 200


def test_staff_revoke_tokens_in_the_admin_and_never_see_digests(
    client: Client, owner, staff
) -> None:
    issued = token_issue(user=owner, name="leaked", scope="submit")
    client.force_login(staff)
    page = client.get(f"/admin/accounts/personaltoken/{issued.token.pk}/change/")
    assert page.status_code == 200 and issued.token.digest not in page.content.decode()
    response = client.post(
        "/admin/accounts/personaltoken/",
        {"action": "revoke", "_selected_action": [issued.token.pk]},
    )
    assert response.status_code == 302
    assert _api(issued.text).get("/api/v1/projects/").status_code == 401


def test_the_page_gives_a_python_snippet_with_the_new_token_only_once(
    client: Client, owner
) -> None:
    client.force_login(owner)
    html = client.post("/account/tokens/", {"name": "nb", "scope": "read", "days": "7"})
    text = html.context["new_token"].text
    snippet = _code(html.content.decode(), "python-snippet")
    ast.parse(snippet)  # it is Python as shown
    assert 'Portal("http://testserver", token="' + text + '")' in snippet
    assert "from portal_client import Portal" in snippet
    later = _code(client.get("/account/tokens/").content.decode(), "python-snippet")
    assert text not in later and 'token="ptk_..."' in later


def _code(page: str, element_id: str) -> str:
    start = page.index(f'<code id="{element_id}">') + len(f'<code id="{element_id}">')
    return html_lib.unescape(page[start : page.index("</code>", start)])
