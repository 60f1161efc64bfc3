import pytest
from django.test import Client
from django.urls import reverse

from clusters.certificates.authorities import authority_create
from clusters.models import Cluster, ClusterAccount
from devtools.keys import new_key_pair


@pytest.fixture
def account(cluster: Cluster) -> tuple[ClusterAccount, str]:
    private, _ = new_key_pair()
    account = ClusterAccount.objects.create(cluster=cluster, username="svc", private_key=private)
    return account, private


def _secret_body(private: str) -> str:
    return private.splitlines()[1]


def test_cluster_list_shows_columns(client: Client, staff, cluster: Cluster) -> None:
    client.force_login(staff)
    response = client.get(reverse("admin:clusters_cluster_changelist"))
    assert response.status_code == 200
    assert b"login.alps.example" in response.content


def test_cluster_page_shows_fingerprint_of_pinned_key(client: Client, staff, cluster) -> None:
    client.force_login(staff)
    response = client.get(reverse("admin:clusters_cluster_change", args=[cluster.pk]))
    assert cluster.host_key_fingerprint.encode() in response.content


def test_a_changed_host_key_that_is_no_key_is_refused(client: Client, staff, cluster) -> None:
    """Adding fetches the key (tests/clusters/test_onboarding_admin.py); changing the pinned
    one by hand still takes only a public host key line."""
    client.force_login(staff)
    page = reverse("admin:clusters_cluster_change", args=[cluster.pk])
    form = client.get(page).context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k in form.fields}
    response = client.post(page, {**data, "host_key": "hello"})
    assert response.status_code == 200
    assert b"ssh-keyscan" in response.content
    cluster.refresh_from_db()
    assert cluster.host_key != "hello"


def test_account_page_never_shows_the_private_key(client: Client, staff, account) -> None:
    obj, private = account
    client.force_login(staff)
    for url in (
        reverse("admin:clusters_clusteraccount_changelist"),
        reverse("admin:clusters_clusteraccount_change", args=[obj.pk]),
    ):
        response = client.get(url)
        assert response.status_code == 200
        assert _secret_body(private).encode() not in response.content
        assert b"BEGIN OPENSSH" not in response.content
    assert b"stored (encrypted)" in response.content


def _account_form(obj: ClusterAccount, key: str) -> dict[str, object]:
    return {
        "cluster": obj.cluster_id,
        "user": "",
        "username": obj.username,
        "authentication": "stored_key",
        "new_private_key": key,
    }


def test_blank_key_keeps_the_stored_one(client: Client, staff, account) -> None:
    obj, private = account
    client.force_login(staff)
    response = client.post(
        reverse("admin:clusters_clusteraccount_change", args=[obj.pk]), _account_form(obj, "")
    )
    assert response.status_code == 302
    assert ClusterAccount.objects.get(pk=obj.pk).private_key == private


def test_new_key_replaces_the_stored_one(client: Client, staff, account) -> None:
    obj, _ = account
    replacement, _ = new_key_pair()
    client.force_login(staff)
    response = client.post(
        reverse("admin:clusters_clusteraccount_change", args=[obj.pk]),
        _account_form(obj, replacement),
    )
    assert response.status_code == 302
    assert ClusterAccount.objects.get(pk=obj.pk).private_key.strip() == replacement.strip()


def test_garbage_key_is_refused_and_not_echoed(client: Client, staff, account) -> None:
    obj, private = account
    client.force_login(staff)
    response = client.post(
        reverse("admin:clusters_clusteraccount_change", args=[obj.pk]),
        _account_form(obj, "-----BEGIN OPENSSH PRIVATE KEY-----\nzzzz-garbage-zzzz\n"),
    )
    assert response.status_code == 200
    assert b"not an unencrypted OpenSSH private key" in response.content
    assert b"zzzz-garbage-zzzz" not in response.content
    assert ClusterAccount.objects.get(pk=obj.pk).private_key == private


def test_new_account_needs_a_key(client: Client, staff, cluster) -> None:
    client.force_login(staff)
    response = client.post(
        reverse("admin:clusters_clusteraccount_add"),
        {
            "cluster": cluster.pk,
            "user": "",
            "username": "svc",
            "authentication": "stored_key",
            "new_private_key": "",
        },
    )
    assert b"needs its private key" in response.content
    assert not ClusterAccount.objects.exists()


def test_second_service_account_on_a_cluster_is_refused(client: Client, staff, account) -> None:
    obj, _ = account
    key, _ = new_key_pair()
    client.force_login(staff)
    response = client.post(
        reverse("admin:clusters_clusteraccount_add"),
        {
            "cluster": obj.cluster_id,
            "user": "",
            "username": "other",
            "authentication": "stored_key",
            "new_private_key": key,
        },
    )
    assert response.status_code == 200
    assert ClusterAccount.objects.count() == 1


def test_account_list_query_count_is_fixed(
    client: Client, staff, cluster, django_assert_max_num_queries
) -> None:
    for n in range(20):
        private, _ = new_key_pair()
        ClusterAccount.objects.create(
            cluster=cluster,
            user=None if n == 0 else _user(n),
            username=f"u{n}",
            private_key=private,
        )
    client.force_login(staff)
    # session, user, count, filtered count, page (cluster, user joined), cluster filter choices
    with django_assert_max_num_queries(8):
        response = client.get(reverse("admin:clusters_clusteraccount_changelist"))
    assert response.status_code == 200


def _user(n: int):
    from django.contrib.auth.models import User

    return User.objects.create(username=f"person{n}")


@pytest.mark.parametrize(
    "name",
    [
        "admin:clusters_cluster_changelist",
        "admin:clusters_clusteraccount_changelist",
        "admin:projects_project_changelist",
        "admin:projects_membership_changelist",
        "admin:projects_quota_changelist",
        "admin:jobs_job_changelist",
        "admin:jobs_attempt_changelist",
    ],
)
def test_admin_pages_refuse_non_staff(client: Client, outsider, member, name: str) -> None:
    for person in (outsider, member):
        client.force_login(person)
        response = client.get(reverse(name))
        assert response.status_code == 302
        assert reverse("admin:login") in response["Location"]


def test_a_certificate_account_needs_no_key_and_switching_to_it_deletes_the_stored_one(
    client: Client, staff, account, cluster
) -> None:
    obj, _ = account
    client.force_login(staff)
    form = {**_account_form(obj, ""), "authentication": "certificate"}
    response = client.post(reverse("admin:clusters_clusteraccount_change", args=[obj.pk]), form)
    assert response.status_code == 302
    switched = ClusterAccount.objects.get(pk=obj.pk)
    assert (switched.authentication, switched.private_key) == ("certificate", "")
    page = client.get(reverse("admin:clusters_clusteraccount_change", args=[obj.pk]))
    assert b"a certificate is signed for each connection" in page.content
    listing = client.get(reverse("admin:clusters_clusteraccount_changelist"))
    assert b"certificate signed by the portal" in listing.content


def test_a_certificate_account_refuses_a_pasted_key(client: Client, staff, cluster) -> None:
    key, _ = new_key_pair()
    client.force_login(staff)
    response = client.post(
        reverse("admin:clusters_clusteraccount_add"),
        {
            "cluster": cluster.pk,
            "user": "",
            "username": "svc",
            "authentication": "certificate",
            "new_private_key": key,
        },
    )
    assert b"Only a stored-key account takes a pasted key" in response.content
    assert not ClusterAccount.objects.exists()


def test_the_cas_are_shown_and_never_edited_in_the_admin(client: Client, staff) -> None:
    ca = authority_create()
    client.force_login(staff)
    listing = client.get(reverse("admin:clusters_certificateauthority_changelist"))
    assert ca.fingerprint.encode() in listing.content
    page = client.get(reverse("admin:clusters_certificateauthority_change", args=[ca.pk]))
    assert page.status_code == 200
    assert b"PRIVATE KEY" not in page.content
    assert client.get(reverse("admin:clusters_certificateauthority_add")).status_code == 403
