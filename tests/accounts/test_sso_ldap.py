"""LDAP log-in against a real OpenLDAP (slapd, started by the `directory` fixture).

The log-in form's name and password go to the directory: the right password signs in
as the directory's person (matched on their entryUUID), a wrong one does not, and the
person's groups give them projects and staff, following the directory at each log-in.
"""

import logging

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.test import Client, RequestFactory
from ldap3 import MODIFY_ADD, MODIFY_DELETE, Connection, Server

from accounts.models import ExternalIdentity
from accounts.selectors import cluster_username_for
from devtools.ldap_server import PASSWORDS, Directory
from projects.models import Membership, Project
from tests.helpers import PASSWORD

pytestmark = pytest.mark.django_db

GROUP_PROJECTS = {
    "ml-team": {"project": "vision", "role": "member"},
    "ml-leads": {"project": "vision", "role": "owner"},
}


@pytest.fixture
def ldap_on(settings, directory: Directory, project: Project) -> Directory:
    for name, value in directory.settings().items():
        setattr(settings, name, value)
    settings.SSO_GROUP_PROJECTS = GROUP_PROJECTS
    settings.SSO_STAFF_GROUP = "hpc-staff"
    return directory


def _log_in(username: str, password: str) -> tuple[Client, int]:
    client = Client()
    response = client.post("/login/", {"username": username, "password": password})
    return client, response.status_code


def _signed_in_as(client: Client) -> User | None:
    response = client.get("/")
    user = response.wsgi_request.user
    return user if isinstance(user, User) and user.is_authenticated else None


def _group(directory: Directory, group: str, op: str, person: str) -> bool:
    with Connection(
        Server(directory.url),
        user=directory.admin_dn,
        password=directory.admin_password,
        auto_bind=True,
    ) as admin:
        member = f"uid={person},{directory.people}"
        return bool(admin.modify(f"cn={group},{directory.groups}", {"member": [(op, [member])]}))


def _move(directory: Directory, group: str, *, out: str, into: str) -> None:
    """`into` joins the group before `out` leaves it: a groupOfNames is never empty."""
    assert _group(directory, group, MODIFY_ADD, into)
    assert _group(directory, group, MODIFY_DELETE, out)


def test_the_right_password_signs_in_as_the_directory_person(ldap_on: Directory) -> None:
    client, status = _log_in("alice", PASSWORDS["alice"])
    assert status == 302
    user = _signed_in_as(client)
    assert user is not None and user.username == "alice"
    assert (user.email, user.first_name, user.last_name) == (
        "alice@example.org",
        "Alice",
        "Liddell",
    )
    assert not user.has_usable_password()  # only the directory knows it
    identity = ExternalIdentity.objects.get(user=user)
    assert identity.issuer == f"ldap:{ldap_on.people}"
    assert len(identity.subject) == 36  # slapd's entryUUID, not the name
    assert identity.groups == ["ml-team"]
    assert cluster_username_for(user) == "alice"
    # ml-team -> vision as a member; not in hpc-staff: not staff.
    assert Membership.objects.get(user=user).role == "member"
    assert not user.is_staff
    # The next log-in is the same portal user.
    again, _ = _log_in("alice", PASSWORDS["alice"])
    assert _signed_in_as(again) == user
    assert User.objects.filter(external_identities__isnull=False).count() == 1


@pytest.mark.parametrize(
    ("username", "password"),
    [
        ("alice", "not-her-password"),
        ("alice", PASSWORDS["bob"]),  # another person's
        ("nobody", PASSWORDS["alice"]),
        ("*", PASSWORDS["alice"]),  # a filter wildcard is a name, not a pattern
        ("alice)(uid=*", PASSWORDS["alice"]),
    ],
)
def test_a_wrong_name_or_password_stays_out(
    ldap_on: Directory, username: str, password: str
) -> None:
    client, status = _log_in(username, password)
    assert status == 200  # the form again, with its error
    assert _signed_in_as(client) is None
    assert not ExternalIdentity.objects.exists()


def test_an_empty_password_is_no_anonymous_bind(ldap_on: Directory) -> None:
    request = RequestFactory().post("/login/")
    assert authenticate(request, username="alice", password="") is None


def test_groups_give_projects_and_staff_and_follow_the_directory(ldap_on: Directory) -> None:
    other = Project.objects.create(slug="unmapped", name="Given by the admin")
    client, _ = _log_in("bob", PASSWORDS["bob"])
    bob = _signed_in_as(client)
    assert bob is not None
    # ml-team (member) and ml-leads (owner) both give vision: the stronger role.
    assert Membership.objects.get(user=bob, project__slug="vision").role == "owner"
    assert bob.is_staff  # hpc-staff
    Membership.objects.create(user=bob, project=other, role="viewer")

    try:
        _move(ldap_on, "ml-leads", out="bob", into="erin")
        _move(ldap_on, "hpc-staff", out="bob", into="erin")
        _log_in("bob", PASSWORDS["bob"])
        bob.refresh_from_db()
        assert Membership.objects.get(user=bob, project__slug="vision").role == "member"
        assert not bob.is_staff

        assert _group(ldap_on, "ml-team", MODIFY_DELETE, "bob")
        _log_in("bob", PASSWORDS["bob"])
        assert not Membership.objects.filter(user=bob, project__slug="vision").exists()
        # A project the mapping does not name keeps what the admin gave.
        assert Membership.objects.filter(user=bob, project=other).exists()
    finally:  # the seeded groups back for the module's other tests
        for group in ("ml-leads", "ml-team", "hpc-staff"):
            _group(ldap_on, group, MODIFY_ADD, "bob")
        for group in ("ml-leads", "hpc-staff"):
            _group(ldap_on, group, MODIFY_DELETE, "erin")


def test_a_person_disabled_in_the_portal_cannot_log_in(ldap_on: Directory) -> None:
    client, _ = _log_in("alice", PASSWORDS["alice"])
    user = _signed_in_as(client)
    assert user is not None
    User.objects.filter(pk=user.pk).update(is_active=False)
    assert _signed_in_as(client) is None  # the open session ends too
    again, status = _log_in("alice", PASSWORDS["alice"])
    assert status == 200 and _signed_in_as(again) is None


def test_a_local_account_of_the_same_name_is_never_taken_over(ldap_on: Directory) -> None:
    local = User.objects.create_user(username="alice", password=PASSWORD, is_staff=True)
    client, _ = _log_in("alice", PASSWORDS["alice"])
    person = _signed_in_as(client)
    assert person is not None and person != local
    assert person.username == "alice-2"
    assert cluster_username_for(person) == "alice"
    assert cluster_username_for(local) is None
    # The local password still signs in the local account.
    local_client, _ = _log_in("alice", PASSWORD)
    assert _signed_in_as(local_client) == local


def test_an_unreachable_directory_refuses_and_says_why_in_the_log(
    settings, ldap_on: Directory, caplog: pytest.LogCaptureFixture
) -> None:
    settings.LDAP_SERVER_URL = "ldap://127.0.0.1:9"  # the discard port: nothing listens
    settings.LDAP_TIMEOUT = 2.0
    with caplog.at_level(logging.ERROR, logger="accounts.sso.directory"):
        client, status = _log_in("alice", PASSWORDS["alice"])
    assert status == 200 and _signed_in_as(client) is None
    assert "LDAP log-in of 'alice' at ldap://127.0.0.1:9 failed" in caplog.text


def test_without_ldap_settings_the_directory_is_not_asked(settings, directory: Directory) -> None:
    settings.LDAP_SERVER_URL = ""
    client, status = _log_in("alice", PASSWORDS["alice"])
    assert status == 200 and _signed_in_as(client) is None
