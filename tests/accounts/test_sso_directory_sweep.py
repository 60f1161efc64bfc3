"""The directory sweep (accounts.tasks.sweep_directory) against a real slapd: a person
deleted there, or outside LDAP_REQUIRED_GROUP, is disabled by one run, with the reason
recorded, and their session, API token and certificate logins stop; a person back in the
directory is readmitted at their next sign-in unless an admin disabled them; one search per
page of identities; a directory that cannot be asked disables nobody."""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from ldap3 import Connection

from accounts.models import AccessChange, ExternalIdentity
from accounts.services import token_issue
from accounts.sso.checks import sso_settings_check
from accounts.tasks import sweep_directory
from clusters.certificates.authorities import authority_create
from clusters.models import Authentication, Cluster, ClusterAccount
from clusters.selectors import account_endpoint
from devtools.ldap_server import PASSWORDS, Directory
from projects.models import Project
from tests import factories
from tests.accounts.sso_directory import (
    DORA_PASSWORD,
    directory_admin,
    dora_in,
    group_member_set,
    log_in,
)
from tests.helpers import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def ldap_on(settings, directory: Directory, project: Project) -> Directory:
    for name, value in directory.settings().items():
        setattr(settings, name, value)
    return directory


@pytest.fixture
def trusting(db: None) -> Cluster:
    """A cluster whose login nodes trust the portal's CA (made here: the worker signs)."""
    authority_create()
    return factories.cluster("alps", trusts_portal_ca=True)


@pytest.fixture
def dora(directory: Directory) -> Iterator[str]:
    with dora_in(directory) as dn:
        yield dn


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every LDAP search sent (its base and filter), counted at ldap3's Connection."""
    sent: list[tuple[str, str]] = []
    original = Connection.search

    def counted(self: Connection, search_base: str, search_filter: str, *a: Any, **k: Any) -> Any:
        sent.append((search_base, search_filter))
        return original(self, search_base, search_filter, *a, **k)

    monkeypatch.setattr(Connection, "search", counted)
    return sent


def _changes(user: User) -> list[tuple[bool, str]]:
    return list(
        AccessChange.objects.filter(user=user).order_by("at", "id").values_list("active", "source")
    )


def test_one_sweep_disables_a_person_deleted_from_the_directory(
    ldap_on: Directory, trusting: Cluster, dora: str
) -> None:
    session = Client()
    person = log_in(session, "dora", DORA_PASSWORD)
    alice = log_in(Client(), "alice", PASSWORDS["alice"])
    assert person is not None and alice is not None
    token = token_issue(user=person, name="notebook", scope="read").text
    account = ClusterAccount.objects.get(user=person, cluster=trusting)
    assert account.authentication == Authentication.CERTIFICATE
    assert account_endpoint(account=account).refusal == ""
    assert Client().get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    with directory_admin(ldap_on) as admin:
        assert admin.delete(dora), admin.result

    sweep_directory()

    person.refresh_from_db()
    alice.refresh_from_db()
    assert not person.is_active and alice.is_active
    change = AccessChange.objects.get(user=person)
    assert (change.active, change.source) == (False, AccessChange.Source.DIRECTORY)
    assert "no longer in the directory" in change.reason
    assert _changes(alice) == []
    # What exists does the rest: the session ends, the token and the certificate stop.
    page = session.get("/jobs/")
    assert page.status_code == 302 and page["Location"].startswith("/login/")
    api = Client().get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.status_code in (401, 403) and "disabled" in api.json()["detail"]
    assert "inactive" in account_endpoint(account=account).refusal
    # A second run finds nothing more to do.
    sweep_directory()
    assert AccessChange.objects.count() == 1


def test_a_person_outside_the_required_group_is_disabled_then_readmitted_when_back(
    settings, ldap_on: Directory
) -> None:
    erin = log_in(Client(), "erin", PASSWORDS["erin"])
    alice = log_in(Client(), "alice", PASSWORDS["alice"])
    assert erin is not None and alice is not None
    settings.LDAP_REQUIRED_GROUP = "ml-team"  # alice and bob's; not erin's

    sweep_directory()

    erin.refresh_from_db()
    assert not erin.is_active and User.objects.get(pk=alice.pk).is_active
    assert "no longer in the group ml-team" in AccessChange.objects.get(user=erin).reason
    assert log_in(Client(), "erin", PASSWORDS["erin"]) is None  # the group is checked there too
    group_member_set(ldap_on, "ml-team", "erin", member=True)
    try:
        assert log_in(Client(), "erin", PASSWORDS["erin"]) == erin
    finally:
        group_member_set(ldap_on, "ml-team", "erin", member=False)
    erin.refresh_from_db()
    assert erin.is_active
    assert _changes(erin) == [
        (False, AccessChange.Source.DIRECTORY),
        (True, AccessChange.Source.SIGN_IN),
    ]


def _admin_sets_active(admin: User, user: User, active: bool) -> None:
    """The admin's user form, saved with "active" ticked or not."""
    client = Client()
    client.force_login(admin)
    form = {
        "username": user.username,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "is_staff": "on" if user.is_staff else "",
        "is_superuser": "",
        "last_login_0": "",
        "last_login_1": "",
        "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
        "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
    }
    if active:
        form["is_active"] = "on"
    answer = client.post(f"/admin/auth/user/{user.pk}/change/", form)
    assert answer.status_code == 302, answer.content.decode()[:2000]


def test_an_admin_disabled_person_is_not_readmitted_by_a_sign_in(
    settings, ldap_on: Directory
) -> None:
    root = User.objects.create_superuser("root", "root@example.org", PASSWORD)
    erin = log_in(Client(), "erin", PASSWORDS["erin"])
    alice = log_in(Client(), "alice", PASSWORDS["alice"])
    assert erin is not None and alice is not None
    # Alice: disabled by an admin while the directory still has her.
    _admin_sets_active(root, alice, active=False)
    # Erin: disabled by the sweep, then re-enabled and disabled again by an admin.
    settings.LDAP_REQUIRED_GROUP = "ml-team"
    sweep_directory()
    erin.refresh_from_db()
    _admin_sets_active(root, erin, active=True)
    _admin_sets_active(root, erin, active=False)
    settings.LDAP_REQUIRED_GROUP = ""

    assert log_in(Client(), "alice", PASSWORDS["alice"]) is None
    assert log_in(Client(), "erin", PASSWORDS["erin"]) is None

    assert not User.objects.get(pk=alice.pk).is_active
    assert not User.objects.get(pk=erin.pk).is_active
    admin_change = AccessChange.objects.filter(user=alice).get()
    assert (admin_change.source, admin_change.admin) == (AccessChange.Source.ADMIN, root)
    assert _changes(erin) == [
        (False, AccessChange.Source.DIRECTORY),
        (True, AccessChange.Source.ADMIN),
        (False, AccessChange.Source.ADMIN),
    ]


def test_the_sweep_asks_the_directory_once_per_page(
    settings, ldap_on: Directory, searches: list[tuple[str, str]]
) -> None:
    for name in ("alice", "bob", "erin"):
        assert log_in(Client(), name, PASSWORDS[name]) is not None
    issuer = ExternalIdentity.objects.values_list("issuer", flat=True).distinct().get()
    gone = []
    for number in range(4):
        user = User.objects.create_user(username=f"left-{number}")
        ExternalIdentity.objects.create(user=user, issuer=issuer, subject=str(uuid.uuid4()))
        gone.append(user.pk)
    settings.LDAP_SWEEP_PAGE_SIZE = 3
    searches.clear()

    with CaptureQueriesContext(connection) as queries:
        sweep_directory()

    # 7 identities in pages of 3, 3 and 1: one search of the people each, whatever their
    # number (ldap3 also reads the server's schema once it connects: not people).
    people = [query for base, query in searches if base == ldap_on.people]
    assert len(people) == 3, searches
    assert sum(query.count("entryUUID=") for query in people) == 7
    assert sorted(User.objects.filter(is_active=False).values_list("pk", flat=True)) == gone
    # Per page, one read of its identities; per page with people gone, one transaction
    # (savepoint, lock, update, audit rows, release): 3 + 2 x 5.
    assert len(queries) == 13, "\n".join(q["sql"] for q in queries)


def test_a_directory_that_cannot_be_asked_disables_nobody(
    settings, ldap_on: Directory, caplog: pytest.LogCaptureFixture
) -> None:
    alice = log_in(Client(), "alice", PASSWORDS["alice"])
    assert alice is not None
    settings.LDAP_REQUIRED_GROUP = "ml-teem"  # misspelt: no such group
    sweep_directory()
    settings.LDAP_REQUIRED_GROUP = ""
    settings.LDAP_USER_FILTER = "(objectClass=person"  # a filter the directory refuses
    sweep_directory()
    settings.LDAP_USER_FILTER = "(objectClass=person)"
    settings.LDAP_SERVER_URL = "ldap://127.0.0.1:9"  # nothing listens
    sweep_directory()

    assert User.objects.get(pk=alice.pk).is_active
    assert not AccessChange.objects.exists()
    stopped = [r.getMessage() for r in caplog.records if "sweep" in r.getMessage()]
    assert len(stopped) == 3 and "ml-teem" in stopped[0], stopped


def test_the_sweep_is_on_beat_and_its_pace_is_checked(settings) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["sweep-directory"]
    assert entry["task"] == sweep_directory.name == "accounts.tasks.sweep_directory"
    assert entry["schedule"] == 600.0
    settings.LDAP_SWEEP_PAGE_SIZE = 0
    settings.LDAP_SWEEP_INTERVAL = 0
    settings.OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS = -1
    errors = {error.id: error.msg for error in sso_settings_check()}
    assert set(errors) == {"accounts.E004", "accounts.E005", "accounts.E006"}
    assert "LDAP_SWEEP_PAGE_SIZE must be 1 to 500" in errors["accounts.E006"]
