"""Fair use (issue #13, point 6): so far the login throttle; the rest is still open.

Before: logins had no throttling; any number of passwords could be tried.
"""

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


def test_logins_are_throttled_per_username_and_address(member: User) -> None:
    member.set_password("right-horse-battery")
    member.save()
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        wrong = client.post("/login/", {"username": member.username, "password": "guess"})
        assert wrong.status_code == 200  # the form again, with its error
    # The failure that reaches the limit locks the pair.
    assert client.post("/login/", {"username": member.username, "password": "x"}).status_code == 429
    # Locked now: even the right password is refused, with a page that says why.
    locked = client.post(
        "/login/", {"username": member.username, "password": "right-horse-battery"}
    )
    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content
    assert "_auth_user_id" not in client.session
    # Another address is not locked out by this one's failures.
    elsewhere = Client(REMOTE_ADDR="10.9.8.7")
    ok = elsewhere.post("/login/", {"username": member.username, "password": "right-horse-battery"})
    assert ok.status_code == 302
