"""The cluster pages: the list in the navigation, CPUs and memory beside GPUs, the queue table."""

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster
from clusters.slurm import Node
from clusters.status import ClusterStatus, PartitionStatus
from jobs.enums import State
from jobs.models import Attempt
from jobs.queue.cluster import cluster_queue
from projects.models import Membership, Project
from tests import factories


@pytest.fixture
def status_read(cluster: Cluster) -> None:
    """A status as a read of the sandbox would leave it: n1 has free GPUs but no free CPU."""
    nodes = [
        Node("n1", "ALLOCATED", 2, 12052, 2, 0, ("gpu",), "", cpus_used=2, memory_used_mb=6026),
        Node("n2", "MIXED", 2, 12052, 2, 2, ("gpu",), "", cpus_used=1, memory_used_mb=3013),
    ]
    partition = PartitionStatus("gpu", True, "UP", "24 h", 2, 4, 2, 2, 4, 1, 24104, 15065)
    status = ClusterStatus("alps", timezone.now(), [partition], nodes, 3, 2)
    cache.set(f"clusters:status:{cluster.pk}", status, 600)


def test_member_sees_cpus_and_memory_beside_gpus(
    client: Client, member: User, cluster: Cluster, status_read: None
) -> None:
    client.force_login(member)
    page = client.get(reverse("cluster-page", args=["alps"])).content.decode()
    assert 'id="cpus-free">1 / 4<' in page
    assert 'id="memory-free">15065 / 24104<' in page
    assert 'data-field="cpus_free">1<' in page
    assert client.get(reverse("cluster-status", args=["alps"])).json()["cpus_free"] == 1


def test_the_queue_lists_the_viewers_live_jobs_with_slurm_id_and_reason(
    client: Client, member: User, owner: User, project: Project, cluster: Cluster,
    status_read: None, django_assert_num_queries,
) -> None:  # fmt: skip
    _, attempt = factories.job(project, owner, cluster, name="waits", state=State.PENDING)
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.PENDING, slurm_job_id="4242", slurm_reason="Resources"
    )
    _, attempt = factories.job(project, member, cluster, name="runs", state=State.RUNNING)
    Attempt.objects.filter(pk=attempt.pk).update(slurm_job_id="4243", node_list="n[1-2]")
    factories.job(project, member, cluster, name="done", state=State.COMPLETED)
    other = Project.objects.create(slug="nlp", name="NLP", slurm_account="nlp")
    stranger = User.objects.create_user("sam")
    Membership.objects.create(user=stranger, project=other, role=Membership.Role.OWNER)
    factories.job(other, stranger, cluster, name="not-yours", state=State.RUNNING)

    # One query: the visible jobs with their latest attempts' Slurm facts.
    with django_assert_num_queries(1):
        rows, more = cluster_queue(user=member, cluster=cluster)
    assert [(r.job.name, r.slurm_job_id, r.pending_reason) for r in rows] == [
        ("waits", "4242", "Resources"),
        ("runs", "4243", ""),
    ]
    assert rows[1].nodes == "n[1-2]" and not more

    client.force_login(member)
    page = client.get(reverse("cluster-page", args=["alps"])).content.decode()
    table = page[page.index('id="queue-table"') :]
    assert "4242" in table and "(Resources)" in table and "n[1-2]" in table
    assert "not-yours" not in page and ">done<" not in table


def test_the_clusters_page_is_in_the_navigation_and_shows_only_usable_clusters(
    client: Client, member: User, outsider: User, cluster: Cluster, status_read: None
) -> None:
    client.force_login(member)
    home = client.get(reverse("home")).content.decode()
    assert f'href="{reverse("cluster-list")}"' in home
    listing = client.get(reverse("cluster-list")).content.decode()
    assert reverse("cluster-page", args=["alps"]) in listing
    assert "1 / 4" in listing  # free CPUs from the last read
    client.force_login(outsider)
    assert "alps" not in client.get(reverse("cluster-list")).content.decode()
    client.logout()
    assert client.get(reverse("cluster-list")).status_code == 302


def test_the_cluster_pages_take_a_fixed_number_of_queries(
    client: Client, member: User, owner: User, project: Project, cluster: Cluster,
    status_read: None, django_assert_num_queries,
) -> None:  # fmt: skip
    for n in range(5):
        factories.job(project, owner, cluster, name=f"run-{n}", state=State.RUNNING)
    client.force_login(member)
    # session, user, the clusters the user's projects may use
    with django_assert_num_queries(3):
        client.get(reverse("cluster-list"))
    # session, user, the cluster (may the user use it), the queue with its attempts' facts
    with django_assert_num_queries(4):
        page = client.get(reverse("cluster-page", args=["alps"]))
    assert page.content.decode().count('<tr data-job="') == 5
