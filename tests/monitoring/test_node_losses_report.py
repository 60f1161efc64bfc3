"""The goodput report's GPU-hours lost per node this month: the nodes pages' numbers, on
every cluster, an attempt that blamed a node twice counted once."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from jobs.enums import State
from jobs.models import Attempt
from monitoring.models import NodeEvent, NodeSignal
from monitoring.nodes.selectors import month_node_losses, month_start
from tests import factories

URL = "/admin/monitoring/efficiencycard/goodput/"


def _blamed(project, user, cluster, node: str, *, hours: float, kinds, at) -> Attempt:
    """An attempt of 4 GPUs that ran `hours` and blamed `node` with each of `kinds`."""
    _, attempt = factories.job(project, user, cluster, nodes=1, gpus_per_node=4)
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.FAILED,
        node_list=node,
        started_at=at - timedelta(hours=hours),
        ended_at=at,
    )
    for kind in kinds:
        NodeEvent.objects.create(
            cluster=cluster, node=node, kind=kind, weight=1.0, at=at, attempt=attempt
        )
    return attempt


@pytest.fixture
def losses(project, owner):
    now = timezone.now()
    start = month_start(now)
    at = start + (now - start) / 2  # within this month, whatever today is
    first, second = factories.cluster(), factories.cluster(name="second")
    both = (NodeSignal.GPU_HARDWARE, NodeSignal.GPU_ECC)
    _blamed(project, owner, first, "n2", hours=2, kinds=both, at=at)  # 8 GPU-h, once
    _blamed(project, owner, first, "n2", hours=1, kinds=(NodeSignal.HANG,), at=at)  # 4
    _blamed(project, owner, second, "g7", hours=5, kinds=(NodeSignal.NODE_FAILURE,), at=at)
    # Before this month: not counted.
    _blamed(project, owner, first, "n3", hours=9, kinds=(NodeSignal.HANG,), at=start - timedelta(1))
    return first, second


def test_each_nodes_lost_gpu_hours_this_month_most_first(losses, django_assert_num_queries):
    first, second = losses
    # The clusters with a blamed node this month, then per cluster the nodes page's own:
    # its clears, its avoided nodes, its nodes' standing, its events (no query per node).
    with django_assert_num_queries(1 + 2 * 4):
        found = month_node_losses(now=timezone.now())
    assert [(x.cluster.name, x.row.node, x.row.gpu_hours_lost) for x in found] == [
        (second.name, "g7", pytest.approx(20.0)),
        (first.name, "n2", pytest.approx(12.0)),
    ]


def test_the_admin_report_lists_them_to_staff(client: Client, losses, staff) -> None:
    client.force_login(staff)
    page = client.get(URL).content.decode()
    section = page[page.index('id="node-loss-table"') :]
    rows = re.findall(
        r"<tr>\s*<td><a href=\"([^\"]+)\">([^<]+)</a></td>\s*<td>([^<]+)</td>"
        r"\s*<td class=\"numeric\">([^<]+)</td>",
        section,
    )
    first, second = losses
    assert rows == [
        (f"/clusters/{second.name}/nodes/", second.name, "g7", "20.0"),
        (f"/clusters/{first.name}/nodes/", first.name, "n2", "12.0"),
    ]


def test_a_month_without_a_blamed_node_says_so(client: Client, db, staff) -> None:
    client.force_login(staff)
    page = client.get(URL).content.decode()
    assert "No node's faults cost GPU-hours this month." in page
