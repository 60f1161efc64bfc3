"""Changing the tests' directory (a real slapd) as its admin: people added, removed, moved
between groups, and a log-in through it in Django's test client."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.contrib.auth.models import User
from django.test import Client
from ldap3 import MODIFY_ADD, MODIFY_DELETE, Connection, Server

from devtools.ldap_server import Directory

DORA_PASSWORD = "dora-in-the-directory"


@contextmanager
def directory_admin(directory: Directory) -> Iterator[Connection]:
    with Connection(
        Server(directory.url),
        user=directory.admin_dn,
        password=directory.admin_password,
        auto_bind=True,
    ) as admin:
        yield admin


@contextmanager
def dora_in(directory: Directory) -> Iterator[str]:
    """Dora, in the directory for the block (removed after, if still there); her dn."""
    dn = f"uid=dora,{directory.people}"
    with directory_admin(directory) as admin:
        assert admin.add(
            dn,
            ["inetOrgPerson", "posixAccount"],
            {
                "uid": "dora",
                "cn": "Dora Explorer",
                "givenName": "Dora",
                "sn": "Explorer",
                "mail": "dora@example.org",
                "uidNumber": "20009",
                "gidNumber": "20009",
                "homeDirectory": "/home/dora",
                "userPassword": DORA_PASSWORD,
            },
        ), admin.result
    try:
        yield dn
    finally:
        with directory_admin(directory) as admin:
            admin.delete(dn)


def group_member_set(directory: Directory, group: str, uid: str, *, member: bool) -> None:
    """Add `uid` to the group (its cn), or take them out."""
    group_dn = f"cn={group},{directory.groups}"
    change = MODIFY_ADD if member else MODIFY_DELETE
    with directory_admin(directory) as admin:
        assert admin.modify(group_dn, {"member": [(change, [f"uid={uid},{directory.people}"])]}), (
            admin.result
        )


def log_in(client: Client, username: str, password: str) -> User | None:
    """The log-in form with a directory password; the user it signed in, or None."""
    client.post("/login/", {"username": username, "password": password})
    user = client.get("/").wsgi_request.user
    return user if isinstance(user, User) and user.is_authenticated else None
