"""A sign-in through the directory (a real slapd), or the OpenID provider on it, gives the
person a certificate account on each cluster that trusts the portal's CA, as the
directory's uid, holding no key; a new uid at a later sign-in is followed, and a person
the directory no longer has is refused."""

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.contrib.auth.models import User
from django.test import Client
from ldap3 import Connection, Server

from clusters.models import Authentication, Cluster, ClusterAccount
from devtools.ldap_server import PASSWORDS, Directory
from devtools.openid_provider import OpenIDProvider
from projects.models import Project
from tests import factories
from tests.accounts.sso_flow import sign_in, signed_in_as

pytestmark = pytest.mark.django_db

ALICE = {
    "objectClass": ["inetOrgPerson", "posixAccount"],
    "cn": "Alice Liddell",
    "givenName": "Alice",
    "sn": "Liddell",
    "mail": "alice@example.org",
    "uidNumber": "20001",
    "gidNumber": "20001",
    "homeDirectory": "/home/alice",
    "userPassword": PASSWORDS["alice"],
}


@pytest.fixture
def ldap_on(settings, directory: Directory, project: Project) -> Directory:
    for name, value in directory.settings().items():
        setattr(settings, name, value)
    settings.SSO_GROUP_PROJECTS = {"ml-team": {"project": "vision", "role": "member"}}
    return directory


@pytest.fixture
def clusters(db: None) -> dict[str, Cluster]:
    return {
        "trusting": factories.cluster("alps", trusts_portal_ca=True),
        "keys only": factories.cluster("bern"),
    }


@contextmanager
def directory_admin(directory: Directory) -> Iterator[Connection]:
    with Connection(
        Server(directory.url),
        user=directory.admin_dn,
        password=directory.admin_password,
        auto_bind=True,
    ) as admin:
        yield admin


def _log_in(username: str, password: str) -> User | None:
    client = Client()
    client.post("/login/", {"username": username, "password": password})
    user = client.get("/").wsgi_request.user
    return user if isinstance(user, User) and user.is_authenticated else None


def _accounts(user: User) -> list[tuple[str, str, str, str]]:
    return list(
        ClusterAccount.objects.filter(user=user)
        .order_by("cluster__name")
        .values_list("cluster__name", "username", "authentication", "private_key")
    )


def test_a_directory_sign_in_gives_a_certificate_account_as_the_uid(
    ldap_on: Directory, clusters: dict[str, Cluster]
) -> None:
    alice = _log_in("alice", PASSWORDS["alice"])
    assert alice is not None
    assert _accounts(alice) == [("alps", "alice", Authentication.CERTIFICATE, "")]
    # The next sign-in finds it.
    assert _log_in("alice", PASSWORDS["alice"]) == alice
    assert ClusterAccount.objects.count() == 1


def test_an_openid_sign_in_gives_the_same_account(
    oidc_on: OpenIDProvider, clusters: dict[str, Cluster]
) -> None:
    client = Client()
    sign_in(client, "bob", PASSWORDS["bob"])
    bob = signed_in_as(client)
    assert bob is not None
    assert _accounts(bob) == [("alps", "bob", Authentication.CERTIFICATE, "")]


def test_a_local_account_of_the_same_name_keeps_its_own_login(
    ldap_on: Directory, clusters: dict[str, Cluster]
) -> None:
    local = User.objects.create_user(username="alice")
    stored = factories.account(clusters["trusting"], local)

    person = _log_in("alice", PASSWORDS["alice"])

    assert person is not None and person.username == "alice-2"
    assert _accounts(person) == [("alps", "alice", Authentication.CERTIFICATE, "")]
    assert ClusterAccount.objects.get(user=local).private_key == stored.private_key


def test_a_new_uid_in_the_directory_is_followed_at_the_next_sign_in(
    ldap_on: Directory, clusters: dict[str, Cluster]
) -> None:
    alice = _log_in("alice", PASSWORDS["alice"])
    assert alice is not None
    account = ClusterAccount.objects.get(user=alice)
    with directory_admin(ldap_on) as admin:
        # The entry keeps its entryUUID (the portal's match); its uid becomes alice_l.
        assert admin.modify_dn(f"uid=alice,{ldap_on.people}", "uid=alice_l"), admin.result
    try:
        assert _log_in("alice_l", PASSWORDS["alice"]) == alice
    finally:
        with directory_admin(ldap_on) as admin:
            assert admin.modify_dn(f"uid=alice_l,{ldap_on.people}", "uid=alice"), admin.result

    assert _accounts(alice) == [("alps", "alice_l", Authentication.CERTIFICATE, "")]
    assert ClusterAccount.objects.get(user=alice).pk == account.pk


def test_a_person_removed_from_the_directory_cannot_sign_in_again(
    ldap_on: Directory, clusters: dict[str, Cluster]
) -> None:
    alice = _log_in("alice", PASSWORDS["alice"])
    assert alice is not None
    dn = f"uid=alice,{ldap_on.people}"
    with directory_admin(ldap_on) as admin:
        assert admin.delete(dn), admin.result
    try:
        assert _log_in("alice", PASSWORDS["alice"]) is None
    finally:  # back for the module's other tests (a new entry: a new entryUUID)
        with directory_admin(ldap_on) as admin:
            attributes = {k: v for k, v in ALICE.items() if k != "objectClass"}
            assert admin.add(dn, ALICE["objectClass"], {**attributes, "uid": "alice"})


def test_a_person_disabled_in_the_portal_gets_no_account(
    ldap_on: Directory, clusters: dict[str, Cluster]
) -> None:
    alice = _log_in("alice", PASSWORDS["alice"])
    assert alice is not None
    ClusterAccount.objects.filter(user=alice).delete()
    User.objects.filter(pk=alice.pk).update(is_active=False)

    assert _log_in("alice", PASSWORDS["alice"]) is None
    assert not ClusterAccount.objects.filter(user=alice).exists()
