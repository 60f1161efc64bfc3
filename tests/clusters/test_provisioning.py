"""A single sign-on's cluster accounts (clusters.provisioning): by certificate, no key held,
on each active cluster that trusts the portal's CA, following the person's cluster name."""

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from clusters.models import Authentication, Cluster, ClusterAccount
from clusters.provisioning import cluster_accounts_follow_name
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def person(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user(username="alice-2")


@pytest.fixture
def trusting() -> list[Cluster]:
    return [
        factories.cluster("alps", trusts_portal_ca=True),
        factories.cluster("bern", trusts_portal_ca=True),
    ]


def _accounts(user: User) -> list[tuple[str, str, str, str]]:
    return list(
        ClusterAccount.objects.filter(user=user)
        .order_by("cluster__name")
        .values_list("cluster__name", "username", "authentication", "private_key")
    )


def test_a_certificate_account_without_a_key_on_each_cluster_that_trusts_the_ca(
    person: User, trusting: list[Cluster]
) -> None:
    factories.cluster("cern")  # its login nodes do not trust the CA
    factories.cluster("dubna", trusts_portal_ca=True, is_active=False)

    made = cluster_accounts_follow_name(user=person, cluster_username="alice")

    assert [(a.cluster.name, a.username) for a in made] == [("alps", "alice"), ("bern", "alice")]
    assert _accounts(person) == [
        ("alps", "alice", Authentication.CERTIFICATE, ""),
        ("bern", "alice", Authentication.CERTIFICATE, ""),
    ]


def test_the_next_sign_in_makes_no_second_account_and_a_new_name_is_followed(
    person: User, trusting: list[Cluster]
) -> None:
    first = {a.pk for a in cluster_accounts_follow_name(user=person, cluster_username="alice")}
    again = {a.pk for a in cluster_accounts_follow_name(user=person, cluster_username="alice")}
    assert again == first

    renamed = cluster_accounts_follow_name(user=person, cluster_username="alice_l")

    assert {a.pk for a in renamed} == first  # the same rows: their jobs stay theirs
    assert _accounts(person) == [
        ("alps", "alice_l", Authentication.CERTIFICATE, ""),
        ("bern", "alice_l", Authentication.CERTIFICATE, ""),
    ]


def test_a_cluster_that_comes_to_trust_the_ca_gets_the_account_at_the_next_sign_in(
    person: User,
) -> None:
    cluster = factories.cluster("alps")
    assert cluster_accounts_follow_name(user=person, cluster_username="alice") == []
    Cluster.objects.filter(pk=cluster.pk).update(trusts_portal_ca=True)
    assert [
        a.cluster.name for a in cluster_accounts_follow_name(user=person, cluster_username="alice")
    ] == ["alps"]


def test_no_name_from_the_provider_makes_and_changes_nothing(
    person: User, trusting: list[Cluster]
) -> None:
    cluster_accounts_follow_name(user=person, cluster_username="alice")
    assert cluster_accounts_follow_name(user=person, cluster_username=None) == []
    assert [row[1] for row in _accounts(person)] == ["alice", "alice"]


def test_an_admins_key_account_is_left_as_the_admin_made_it(
    person: User, trusting: list[Cluster]
) -> None:
    stored = factories.account(trusting[0], person)

    made = cluster_accounts_follow_name(user=person, cluster_username="alice")

    assert [a.cluster.name for a in made] == ["bern"]
    stored_now = ClusterAccount.objects.get(pk=stored.pk)
    assert (stored_now.username, stored_now.authentication) == (
        "alice-2",
        Authentication.STORED_KEY,
    )
    assert stored_now.private_key == stored.private_key


def test_another_persons_accounts_are_untouched(person: User, trusting: list[Cluster]) -> None:
    bob = User.objects.create_user(username="bob")
    cluster_accounts_follow_name(user=bob, cluster_username="bob")
    cluster_accounts_follow_name(user=person, cluster_username="alice")
    assert [row[1] for row in _accounts(bob)] == ["bob", "bob"]


def test_a_name_no_cluster_takes_is_refused_before_anything_is_made(
    person: User, trusting: list[Cluster]
) -> None:
    with pytest.raises(ValidationError, match="POSIX user name"):
        cluster_accounts_follow_name(user=person, cluster_username="Alice Smith")
    assert _accounts(person) == []


def test_the_queries_of_a_sign_in_that_changes_nothing(
    person: User, trusting: list[Cluster], django_assert_num_queries
) -> None:
    cluster_accounts_follow_name(user=person, cluster_username="alice")
    # SAVEPOINT, the accounts held (FOR UPDATE, clusters as a subquery), the clusters,
    # RELEASE SAVEPOINT.
    with django_assert_num_queries(4):
        cluster_accounts_follow_name(user=person, cluster_username="alice")
