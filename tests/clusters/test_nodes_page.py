"""The admin's nodes page of a cluster: the ledger's verdicts, evidence jobs, GPU-hours lost,
the suggested drain; staff pin and clear; nobody else sees or changes anything."""

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from clusters.avoidance import avoided_nodes, node_avoid
from clusters.status import ClusterStatus
from jobs.enums import State
from jobs.models import Attempt
from monitoring.models import NodeEvent, NodeHealth, NodeSignal
from tests import factories

PAGE = "/clusters/{}/nodes/"


@pytest.fixture
def cluster(db):
    return factories.cluster()


def _blame(project, user, cluster, node: str, hours_ago: float = 1.0) -> Attempt:
    """An attempt of 2 GPUs that ran 30 minutes on `node` and failed there."""
    _, attempt = factories.job(project, user, cluster, nodes=1, gpus_per_node=2)
    ended = timezone.now() - timedelta(hours=hours_ago)
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.FAILED,
        node_list=node,
        started_at=ended - timedelta(minutes=30),
        ended_at=ended,
    )
    attempt.refresh_from_db()
    NodeHealth.objects.get_or_create(cluster=cluster, node=node)
    NodeEvent.objects.create(
        cluster=cluster,
        node=node,
        kind=NodeSignal.GPU_HARDWARE,
        weight=1.0,
        at=ended,
        attempt=attempt,
        detail="GPU hardware fault",
    )
    return attempt


def test_staff_see_each_node_worst_first_with_its_evidence_and_a_drain_reason(
    client: Client, staff, project, member, owner, cluster, django_assert_num_queries
) -> None:
    now = timezone.now()
    if now.day == 1 and now.hour < 4:
        pytest.skip("the faults of the test would fall in last month")
    # Two people's jobs failed there: enough for a bad verdict (NODE_BAD_MIN_USERS).
    faults = [_blame(project, user, cluster, "gpu07") for user in (member, owner, member)]
    NodeHealth.objects.create(cluster=cluster, node="gpu01", healthy_jobs=12)
    node_avoid(cluster=cluster, node="gpu07", reason="judged bad (score 3.0)")
    client.force_login(staff)
    # Session, user, cluster; then the clears, the avoided nodes, the ledger's nodes, and
    # the events with their attempts and jobs: the same seven for any number of nodes.
    with django_assert_num_queries(7):
        response = client.get(PAGE.format(cluster.name))
    assert response.status_code == 200
    rows = response.context["rows"]
    assert [r.node for r in rows] == ["gpu07", "gpu01"]
    bad, healthy = rows
    assert bad.verdict == "bad" and 2.5 < bad.score <= 3.0
    assert bad.gpu_hours_lost == pytest.approx(3 * 0.5 * 2)
    assert healthy.verdict == "healthy" and healthy.healthy_jobs == 12
    jobs = " ".join(f"#{a.job_id}" for a in faults)
    assert bad.drain_reason == f"portal ledger: 3 x GPU hardware fault, jobs {jobs}"
    page = response.content.decode()
    assert f'href="/jobs/{faults[0].job_id}/?attempt=1"' in page
    assert "judged bad (score 3.0)" in page
    assert f"/clusters/{cluster.name}/nodes/gpu07/drain/" in page
    assert healthy.drain_reason == ""


def test_the_page_and_its_actions_are_staff_only(client: Client, member, outsider, cluster) -> None:
    node_avoid(cluster=cluster, node="n1", reason="bad")
    response = client.get(PAGE.format(cluster.name))
    assert response.status_code == 302 and "/login/" in response["Location"]
    for user in (member, outsider):
        client.force_login(user)
        assert client.get(PAGE.format(cluster.name)).status_code == 403
        assert client.post(f"/clusters/{cluster.name}/nodes/n2/avoid/").status_code == 403
        assert client.post(f"/clusters/{cluster.name}/nodes/n1/clear/").status_code == 403
    assert set(avoided_nodes(cluster=cluster)) == {"n1"}


def test_staff_pin_a_node_and_put_it_back(client: Client, staff, cluster) -> None:
    client.force_login(staff)
    response = client.post(
        f"/clusters/{cluster.name}/nodes/avoid/", {"node": "n3", "reason": "link flaps"}
    )
    assert response.status_code == 302 and response["Location"] == PAGE.format(cluster.name)
    pinned = avoided_nodes(cluster=cluster)["n3"]
    assert pinned.until is None and pinned.reason == f"link flaps (pinned by {staff.username})"
    assert "pinned: link flaps" in client.get(PAGE.format(cluster.name)).content.decode()
    client.post(f"/clusters/{cluster.name}/nodes/n3/clear/")
    assert avoided_nodes(cluster=cluster) == {}


def test_a_name_that_is_no_node_is_refused_with_a_message(client: Client, staff, cluster) -> None:
    client.force_login(staff)
    response = client.post(f"/clusters/{cluster.name}/nodes/avoid/", {"node": "n1 n2"})
    assert ["not a node name" in str(m) for m in get_messages(response.wsgi_request)] == [True]
    assert avoided_nodes(cluster=cluster) == {}
    assert client.get(PAGE.format("nowhere")).status_code == 404


def test_the_cluster_list_links_staff_to_each_clusters_node_health(
    client: Client, staff, member, cluster
) -> None:
    client.force_login(staff)
    assert f'href="{PAGE.format(cluster.name)}"' in client.get("/clusters/").content.decode()
    client.force_login(member)
    page = client.get("/clusters/").content.decode()
    assert f'href="/clusters/{cluster.name}/"' in page and "node health" not in page


def test_the_cluster_page_links_staff_to_its_node_health(
    client: Client, staff, member, cluster
) -> None:
    # A status as a read would leave it in the cache: the page asks no cluster.
    status = ClusterStatus(cluster=cluster.name, read_at=timezone.now(), partitions=[], nodes=[])
    cache.set(f"clusters:status:{cluster.pk}", status, 600)
    link = f'<a href="{PAGE.format(cluster.name)}" id="cluster-nodes-link">'
    client.force_login(staff)
    assert link in client.get(f"/clusters/{cluster.name}/").content.decode()
    client.force_login(member)
    page = client.get(f"/clusters/{cluster.name}/").content.decode()
    assert cluster.name in page and "cluster-nodes-link" not in page
