"""Signing in through the tests' OpenID provider without a browser: the portal's side in
Django's test client, the provider's pages with httpx (as a browser without JavaScript)."""

import re
from urllib.parse import urljoin, urlsplit

import httpx
from django.contrib.auth.models import User
from django.test import Client


def at_provider(auth_url: str, username: str, password: str) -> str | httpx.Response:
    """Sign in on the provider's own form; the URL it sends the browser back to the portal
    with, or its page when it did not let the person in."""
    with httpx.Client(timeout=30) as browser:
        answer = browser.get(auth_url)
        while answer.status_code in (302, 303) and "/interaction/" in answer.headers["location"]:
            answer = browser.get(urljoin(auth_url, answer.headers["location"]))
        if answer.status_code != 200 or "<form" not in answer.text:
            return answer
        action = re.search(r'action="([^"]+)"', answer.text)
        assert action is not None, answer.text
        answer = browser.post(
            urljoin(auth_url, action.group(1)), data={"username": username, "password": password}
        )
        if answer.status_code == 200:
            return answer  # the form again, with its error
        while answer.status_code in (302, 303):
            location = urljoin(auth_url, answer.headers["location"])
            if not location.startswith(auth_url.split("/auth")[0]):
                return location  # back to the portal
            answer = browser.get(location)
        return answer


def sign_in(client: Client, username: str, password: str, *, next_url: str = "/"):
    """The portal's start, the provider's form, and the portal's callback: its answer."""
    start = client.get("/sso/oidc/start/", {"next": next_url})
    assert start.status_code == 302, start
    back = at_provider(start["Location"], username, password)
    assert isinstance(back, str), getattr(back, "text", back)
    parts = urlsplit(back)
    assert parts.netloc == "testserver" and parts.path == "/sso/oidc/callback/", back
    return client.get(f"{parts.path}?{parts.query}")


def signed_in_as(client: Client) -> User | None:
    user = client.get("/").wsgi_request.user
    return user if isinstance(user, User) and user.is_authenticated else None
