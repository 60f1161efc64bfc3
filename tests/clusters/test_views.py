"""The cluster page: who may see it, and one shared Slurm read per cluster per interval."""

import threading

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters import status as cluster_status_module
from clusters.models import Cluster
from clusters.sandbox.config import GPUS_PER_NODE, NODES
from clusters.slurm import Node
from clusters.ssh import stats
from clusters.status import ClusterStatus, PartitionStatus, cluster_status
from projects.models import Project, Quota
from tests import factories


@pytest.fixture
def status_read(cluster: Cluster) -> None:
    """The cluster's status as a read would leave it in the cache."""
    node = Node(
        name="n1", state="MIXED", cpus=64, memory_mb=512000, gpus=8, gpus_used=3,
        partitions=("gpu",), reason="",
    )  # fmt: skip
    # A status as a read would leave it, so these tests need no cluster.
    cache.set(
        f"clusters:status:{cluster.pk}",
        ClusterStatus(
            cluster="alps",
            read_at=timezone.now(),
            partitions=[PartitionStatus("gpu", True, "UP", "24 h", 1, 8, 3, 5)],
            nodes=[node],
            pending_jobs=7,
            running_jobs=2,
        ),
        600,
    )


@pytest.mark.parametrize("name", ["cluster-page", "cluster-status"])
def test_logged_out_visitor_is_sent_to_login(
    client: Client, cluster: Cluster, status_read: None, name: str
) -> None:
    response = client.get(reverse(name, args=[cluster.name]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name", ["cluster-page", "cluster-status"])
def test_outsider_is_refused(
    client: Client, outsider: User, cluster: Cluster, status_read: None, name: str
) -> None:
    client.force_login(outsider)
    assert client.get(reverse(name, args=[cluster.name])).status_code == 404


def test_member_sees_partitions_nodes_gpus_and_queue(
    client: Client, member: User, cluster: Cluster, status_read: None
) -> None:
    client.force_login(member)
    page = client.get(reverse("cluster-page", args=["alps"]))
    assert page.status_code == 200
    status = page.context["status"]
    assert (status.gpus_total, status.gpus_allocated, status.gpus_free) == (8, 3, 5)
    text = page.content.decode()
    assert 'id="pending-jobs">7<' in text
    assert "MIXED" in text
    assert client.get(reverse("cluster-status", args=["alps"])).json()["gpus_free"] == 5


def test_a_quota_naming_other_clusters_hides_this_one(
    client: Client, member: User, staff: User, project: Project, cluster: Cluster, status_read: None
) -> None:
    other = factories.cluster("bern")
    Quota.objects.get(project=project).allowed_clusters.add(other)
    client.force_login(member)
    assert client.get(reverse("cluster-page", args=["alps"])).status_code == 404
    assert client.get(reverse("cluster-page", args=["nowhere"])).status_code == 404
    client.force_login(staff)
    assert client.get(reverse("cluster-page", args=["alps"])).status_code == 200


@pytest.mark.sandbox
@pytest.mark.django_db(transaction=True)
def test_viewers_share_one_slurm_read_per_interval(
    sandbox_cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache.clear()
    stats.reset()
    results: list[ClusterStatus] = []
    start = threading.Barrier(8)

    def view() -> None:
        start.wait()
        try:
            results.append(cluster_status(cluster=sandbox_cluster))
        finally:
            connection.close()  # this thread's own connection, or the test database stays open

    threads = [threading.Thread(target=view) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    # One read: partitions, nodes and the queue, for all eight viewers.
    assert stats.commands == 3
    assert len(results) == 8
    assert len({status.read_at for status in results}) == 1
    status = results[0]
    assert status.error == ""
    assert [node.name for node in status.nodes] == list(NODES)
    assert status.gpus_total == len(NODES) * GPUS_PER_NODE
    assert [p.name for p in status.partitions] == ["gpu"]

    cluster_status(cluster=sandbox_cluster)
    assert stats.commands == 3  # still fresh: nobody reads again
    monkeypatch.setattr(cluster_status_module, "STATUS_INTERVAL", 0)
    again = cluster_status(cluster=sandbox_cluster)
    assert stats.commands == 6
    assert again.read_at is not None and status.read_at is not None
    assert again.read_at > status.read_at
    cache.clear()


def test_an_unreachable_cluster_is_shown_as_such_and_frees_the_lock(
    client: Client, member: User, db: None
) -> None:
    cache.clear()
    cluster = factories.cluster("gone")
    Cluster.objects.filter(pk=cluster.pk).update(ssh_host="127.0.0.1", ssh_port=1)
    factories.account(cluster, None)
    client.force_login(member)
    page = client.get(reverse("cluster-page", args=["gone"]))
    assert page.status_code == 200
    assert "Cannot reach the cluster" in page.content.decode()
    assert cache.get(f"clusters:status:{cluster.pk}:lock") is None
    cache.clear()


def test_a_viewer_waits_briefly_for_the_first_read_then_says_so(
    member: User, db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.clear()
    cluster = factories.cluster("busy")
    cache.add(f"clusters:status:{cluster.pk}:lock", "1", 60)  # another viewer is reading
    monkeypatch.setattr(cluster_status_module, "WAIT_SECONDS", 0.2)
    stats.reset()
    status = cluster_status(cluster=cluster)
    assert status.error == "The status is being read; reload in a moment."
    assert stats.commands == 0
    cache.clear()
