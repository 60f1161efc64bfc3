"""The admin's Clusters -> Add: host and port, the host key fetched from the login node and
its fingerprint confirmed, then the cluster recorded and its readiness report queued.

Staff only; a wrong fingerprint is refused; nothing is recorded until confirmed. The
sandbox tests fetch the key from the sandbox's real sshd."""

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from clusters.certificates.authorities import (
    authorities_publish,
    authority_create,
    sandbox_trust_path,
    trust_owner,
)
from clusters.certificates.trust_file import trusted_keys_write
from clusters.hostkeys import fingerprint, parse_host_key
from clusters.models import Cluster, ReadinessReport
from devtools.keys import new_key_pair
from devtools.servers import free_port
from tests.helpers import worker_tag

ADD = "admin:clusters_cluster_add"


def _sha256(host_key: str) -> str:
    return fingerprint(*parse_host_key(host_key)).split()[1]


def _host(info: object, name: str, **extra: object) -> dict[str, object]:
    return {
        "ssh_host": info.ssh_host,  # type: ignore[attr-defined]
        "ssh_port": info.ssh_port,  # type: ignore[attr-defined]
        "name": name,
        "portal_username": info.portal_user,  # type: ignore[attr-defined]
        "base_run_dir": f"~/portal-runs/{worker_tag()}-admin-add",
        "scan": "Fetch the host key",
        **extra,
    }


def test_only_staff_with_the_add_permission_reach_the_add_page(
    client: Client, member: User, django_user_model: type[User]
) -> None:
    add = reverse(ADD)
    login = reverse("admin:login")
    assert client.get(add)["Location"].startswith(login)
    client.force_login(member)  # a portal user, not staff
    assert client.post(add, {"ssh_host": "127.0.0.1", "ssh_port": 22})["Location"].startswith(login)
    viewer = django_user_model.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_cluster"))
    client.force_login(viewer)  # staff, but may not add clusters
    assert client.get(add).status_code == 403
    assert client.post(add, {"ssh_host": "127.0.0.1", "ssh_port": 22}).status_code == 403
    assert not Cluster.objects.exists()


def test_the_add_page_asks_for_the_host_never_a_host_key(client: Client, staff: User) -> None:
    client.force_login(staff)
    page = client.get(reverse(ADD)).content.decode()
    assert 'name="ssh_host"' in page and 'name="ssh_port"' in page
    assert 'name="portal_username"' in page and 'name="trusts_portal_ca"' in page
    assert 'name="host_key"' not in page
    guarded = Client(enforce_csrf_checks=True)
    guarded.force_login(staff)
    assert guarded.post(reverse(ADD), {"ssh_host": "127.0.0.1", "ssh_port": 22}).status_code == 403


def test_a_host_with_no_sshd_is_named_and_nothing_recorded(client: Client, staff: User) -> None:
    client.force_login(staff)
    port = free_port()
    response = client.post(reverse(ADD), {"ssh_host": "127.0.0.1", "ssh_port": port, "scan": "1"})
    assert response.status_code == 200
    assert f"port {port}" in response.content.decode()
    assert not Cluster.objects.exists()


def test_a_confirmation_without_a_fetched_key_starts_again(client: Client, staff: User) -> None:
    client.force_login(staff)
    _, host_key = new_key_pair()
    response = client.post(
        reverse(ADD),
        {"confirm": "1", "fingerprint": _sha256(host_key), "host_key": host_key},
    )
    assert response.status_code == 302 and response["Location"] == reverse(ADD)
    assert not Cluster.objects.exists()


@pytest.mark.sandbox
def test_the_admin_adds_a_cluster_only_once_its_fingerprint_is_confirmed(
    client: Client, staff: User, sandbox_info, django_capture_on_commit_callbacks
) -> None:
    client.force_login(staff)
    step1 = client.post(reverse(ADD), _host(sandbox_info, "adm-sandbox"))
    assert step1.status_code == 200, step1.content.decode()[-2000:]
    shown = fingerprint(*parse_host_key(sandbox_info.host_key))
    assert f'<code id="host-key-fingerprint">{shown}</code>' in step1.content.decode()
    assert sandbox_info.host_key.split()[1] not in step1.content.decode()  # kept server-side
    assert not Cluster.objects.exists()

    # Neither a fingerprint nor the box ticked: asked again, nothing recorded.
    unconfirmed = client.post(reverse(ADD), {"confirm": "1"})
    assert unconfirmed.status_code == 200 and "Confirm the host key" in unconfirmed.content.decode()
    # Another key's fingerprint: refused, naming the one presented.
    _, other = new_key_pair()
    wrong = client.post(reverse(ADD), {"confirm": "1", "fingerprint": _sha256(other)})
    text = wrong.content.decode()
    assert wrong.status_code == 200 and "not the expected" in text and shown in text
    # A key sent by the browser is ignored: the fetched one is what is confirmed.
    forged = client.post(
        reverse(ADD),
        {"confirm": "1", "fingerprint": _sha256(other), "host_key": other, "compared": "on"},
    )
    assert forged.status_code == 200 and "not the expected" in forged.content.decode()
    assert not Cluster.objects.exists() and not ReadinessReport.objects.exists()

    with django_capture_on_commit_callbacks() as queued:
        done = client.post(
            reverse(ADD),
            {
                "confirm": "1",
                "fingerprint": _sha256(sandbox_info.host_key),
                "new_portal_private_key": sandbox_info.portal_key,
            },
        )
    assert done.status_code == 302
    assert done["Location"] == reverse("cluster-page", args=["adm-sandbox"]) + "#readiness"
    cluster = Cluster.objects.get(name="adm-sandbox")
    assert cluster.host_key == sandbox_info.host_key
    assert (cluster.ssh_host, cluster.ssh_port) == (sandbox_info.ssh_host, sandbox_info.ssh_port)
    assert cluster.portal_username == sandbox_info.portal_user and cluster.portal_private_key
    assert cluster.base_run_dir.endswith("-admin-add") and not cluster.trusts_portal_ca
    # Where Slurm is came from the operator's login environment, as the command reads it.
    assert cluster.slurm_conf == sandbox_info.slurm_conf
    report = ReadinessReport.objects.get(cluster=cluster)
    assert report.state == ReadinessReport.State.RUNNING and report.requested_by == staff
    assert len(queued) == 1  # the readiness report, queued for the Celery worker
    page = client.get(done["Location"]).content.decode()
    assert "readiness check started" in page and 'id="readiness"' in page
    # The form is gone with the confirmation: a second one starts again.
    again = client.post(reverse(ADD), {"confirm": "1", "compared": "on"})
    assert again.status_code == 302 and Cluster.objects.count() == 1


@pytest.mark.sandbox
def test_a_cluster_trusting_the_ca_is_added_with_no_operator_key_and_checked(
    client: Client,
    staff: User,
    sandbox_info,
    eager_celery: None,
    django_capture_on_commit_callbacks,
) -> None:
    client.force_login(staff)
    # No CA yet: the operator cannot log in by certificate, and the page says what to do.
    client.post(reverse(ADD), _host(sandbox_info, "adm-ca", trusts_portal_ca="on"))
    refused = client.post(reverse(ADD), {"confirm": "1", "compared": "on"})
    assert "ssh_ca create" in refused.content.decode() and not Cluster.objects.exists()

    authority_create()
    authorities_publish(path=sandbox_trust_path())
    try:
        with django_capture_on_commit_callbacks(execute=True):
            done = client.post(reverse(ADD), {"confirm": "1", "compared": "on"})
        assert done.status_code == 302
        cluster = Cluster.objects.get(name="adm-ca")
        assert cluster.trusts_portal_ca and cluster.portal_private_key == ""
        report = ReadinessReport.objects.get(cluster=cluster)
        assert report.state == ReadinessReport.State.DONE
        verdicts = {check["name"]: check for check in report.checks}
        login = verdicts["Login node"]
        assert login["passed"] and f"logged in as {sandbox_info.portal_user}" in login["detail"]
        html = client.get(done["Location"]).content.decode()
        assert 'data-check="Login node" data-passed="true"' in html
        # As `cluster add` does, a new cluster whose sacct answered charges from it.
        assert verdicts["Accounting (sacct)"]["passed"] == sandbox_info.accounting
        cluster.refresh_from_db()
        assert cluster.accounting_enabled == sandbox_info.accounting
    finally:
        trusted_keys_write(path=sandbox_trust_path(), owner=trust_owner(), lines=[])
