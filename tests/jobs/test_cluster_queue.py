"""The cluster pages: the list in the navigation, CPUs and memory beside GPUs, the queue.

The queue: the projects' lines (jobs_submit's real waiting jobs, with their places),
Slurm's pending jobs with its reason in plain words, the rest; who sees which (a member:
their projects' jobs; staff: every project's); the last week's waits per partition.
"""

from datetime import timedelta
from decimal import Decimal

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
from jobs.models import Attempt, Job
from jobs.queue.cluster import cluster_queue, line_places_of, queue_parts
from jobs.queue.line import line_places
from jobs.queue.waits import recent_waits_by_partition
from jobs.services import job_submit
from projects.models import Membership, Project, Quota
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
    pending = _table(page, "pending-table")
    assert "4242" in pending and "Waiting for resources: the GPUs" in pending
    assert 'title="Slurm\'s reason: Resources"' in pending
    running = _table(page, "queue-table")
    assert "n[1-2]" in running and "4242" not in running
    assert "not-yours" not in page and ">done<" not in page


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
    # session, user, the cluster (may the user use it), the queue with its attempts' facts,
    # the last week's waits
    with django_assert_num_queries(5):
        page = client.get(reverse("cluster-page", args=["alps"]))
    assert page.content.decode().count('<tr data-job="') == 5


def _table(page: str, table_id: str) -> str:
    start = page.index(f'id="{table_id}"')
    return page[start : page.index("</table>", start)]


def _submit(user: User, project: Project, cluster: Cluster, name: str) -> Job:
    spec = factories.spec(name=name, nodes=1, gpus_per_node=1, time_limit=timedelta(hours=1))
    return job_submit(
        user=user, project=project, cluster=cluster, spec=spec,
        partitions={"gpu": factories.GPU_PARTITION},
    )  # fmt: skip


@pytest.fixture
def lines(submitter: User, project: Project, cluster: Cluster, no_submission: list[int]) -> dict:
    """Vision capped at 2 concurrent GPUs with 4 jobs (2 wait); nlp at 1 with 2 (1 waits)."""
    Quota.objects.filter(project=project).update(max_concurrent_gpus=2)
    vision = [_submit(submitter, project, cluster, f"v{n}") for n in range(4)]
    nlp = Project.objects.create(slug="nlp", name="NLP", slurm_account="nlp")
    Quota.objects.create(
        project=nlp, gpu_hours_per_period=Decimal("100"), max_concurrent_gpus=1,
        max_gpus_per_job=4, max_wall_time=timedelta(hours=12),
    )  # fmt: skip
    stranger = User.objects.create_user("sam")
    Membership.objects.create(user=stranger, project=nlp, role=Membership.Role.OWNER)
    factories.account(cluster, stranger)
    others = [_submit(stranger, nlp, cluster, f"n{n}") for n in range(2)]
    return {"vision": vision, "nlp": others, "stranger": stranger}


def test_the_line_shows_each_waiting_job_with_its_place_and_reason(
    client: Client, member: User, cluster: Cluster, lines: dict, status_read: None,
    django_assert_num_queries,
) -> None:  # fmt: skip
    rows, _ = cluster_queue(user=member, cluster=cluster)
    with django_assert_num_queries(1):  # every project's line at once
        parts = queue_parts(rows)
    assert [(r.row.job.name, r.place and r.place.number) for r in parts.line] == [
        ("v2", 1),
        ("v3", 2),
    ]
    assert parts.line[1].place and parts.line[1].place.words == (
        "Place 2 of 2 in project vision's line."
    )
    assert [r.job.name for r in parts.others] == ["v0", "v1"] and not parts.pending
    # The places are the line's own, for any mix of projects.
    waiting = list(Attempt.objects.filter(state=State.WAITING).select_related("job__project"))
    ours = line_places_of(
        attempt_ids=[a.pk for a in waiting], project_ids={a.job.project_id for a in waiting}
    )
    assert ours == line_places(waiting) and len(ours) == 3

    client.force_login(member)
    page = client.get(reverse("cluster-page", args=["alps"])).content.decode()
    line = _table(page, "line-table")
    assert ">1 of 2<" in line and ">2 of 2<" in line
    assert "Waiting for room: project vision has 2 of its 2 concurrent GPUs in use" in line
    assert ">v0<" in _table(page, "queue-table") and ">v0<" not in line
    assert "nlp" not in page  # another project's line is not the member's to see


def test_staff_see_every_projects_jobs_and_an_outsider_none(
    client: Client, member: User, staff: User, cluster: Cluster, lines: dict, status_read: None,
    django_assert_num_queries,
) -> None:  # fmt: skip
    client.force_login(staff)
    # session, user, the cluster, the queue, the lines' places, the last week's waits, and
    # for staff the cluster's latest readiness report
    with django_assert_num_queries(7):
        page = client.get(reverse("cluster-page", args=["alps"])).content.decode()
    line = _table(page, "line-table")
    assert ">v2<" in line and ">n1<" in line
    assert "Next in project nlp&#x27;s line (1 waiting)." in line
    assert "every project's jobs here (you are staff)" in page
    assert "None of your projects" not in page
    assert "No portal job is pending in Slurm here." in _table(page, "pending-table")

    # The nlp owner sees nlp's jobs only; one who belongs to no project, no page at all.
    client.force_login(lines["stranger"])
    page = client.get(reverse("cluster-page", args=["alps"])).content.decode()
    assert ">n1<" in _table(page, "line-table") and ">v" not in page
    assert "None of your projects' jobs is pending in Slurm here." in page
    nobody = User.objects.create_user("nobody")
    client.force_login(nobody)
    assert client.get(reverse("cluster-page", args=["alps"])).status_code == 404


def _started(project: Project, user: User, cluster: Cluster, partition: str, **times) -> None:
    _, attempt = factories.job(project, user, cluster, partition=partition, state=State.COMPLETED)
    Attempt.objects.filter(pk=attempt.pk).update(state=State.COMPLETED, **times)


def test_the_last_weeks_waits_per_partition(
    client: Client, member: User, owner: User, project: Project, cluster: Cluster,
    status_read: None,
) -> None:  # fmt: skip
    now = timezone.now()
    for n, minutes in enumerate([1, 2, 3, 4, 30]):  # gpu, named or the default
        submitted = now - timedelta(hours=n + 1)
        _started(project, owner, cluster, "" if n % 2 else "gpu",
                 submitted_at=submitted, started_at=submitted + timedelta(minutes=minutes))  # fmt: skip
    for minutes in (5, 6):  # debug: too few for a median
        _started(project, owner, cluster, "debug", submitted_at=now - timedelta(days=1),
                 started_at=now - timedelta(days=1) + timedelta(minutes=minutes))  # fmt: skip
    _started(project, owner, cluster, "gpu", submitted_at=now - timedelta(days=8),
             started_at=now - timedelta(days=8) + timedelta(hours=9))  # too old  # fmt: skip
    _started(project, owner, cluster, "gpu", submitted_at=now - timedelta(minutes=5))  # waits

    debug, gpu = recent_waits_by_partition(cluster_id=cluster.pk, now=now, default_partition="gpu")
    assert (gpu.partition, gpu.count, debug.partition, debug.count) == ("gpu", 5, "debug", 2)
    assert gpu.median == timedelta(minutes=3)  # percentile_cont of 1, 2, 3, 4, 30 minutes
    assert gpu.p90 == timedelta(minutes=4 + 0.6 * 26)
    assert [seconds for _, seconds in gpu.points] == [1800.0, 240.0, 180.0, 120.0, 60.0]
    assert debug.median is None and debug.median_text == "too few to tell"
    # Where the default partition's name is not known, its jobs are shown apart.
    unnamed = recent_waits_by_partition(cluster_id=cluster.pk, now=now)
    assert [(w.partition, w.count) for w in unnamed] == [("", 2), ("debug", 2), ("gpu", 3)]

    client.force_login(member)
    page = client.get(reverse("cluster-page", args=["alps"])).content.decode()
    waits = _table(page, "waits-table")
    assert '<tr data-partition="gpu"><td>gpu</td><td class="num">5</td>' in waits
    assert 'data-field="median">3 min<' in waits and 'data-field="p90">20 min<' in waits
    assert 'id="waits-data"' in page and "js/cluster-waits.js" in page
