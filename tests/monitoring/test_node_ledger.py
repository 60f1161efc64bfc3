"""The node health ledger: ended attempts' word on their nodes, through the poll's watchers,
the verdicts, a bad node's avoidance and the staff's alert; healthy nodes never blamed."""

import pytest
from django.core import mail
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from clusters.agent import AgentReply
from clusters.avoidance import avoided_nodes, node_avoid_clear
from jobs.enums import FailureClass, State
from jobs.models import Attempt
from monitoring.diagnosis.failures import FailureWatcher
from monitoring.logs.store import Delivery, log_files, log_store
from monitoring.models import NodeEvent, NodeHealth, NodeSignal
from monitoring.nodes.ledger import attempt_nodes_record
from monitoring.nodes.watch import NodeLedgerWatcher
from tests import factories

# Real text: a job on a node with a failing GPU (jade-hpc-gpu issue 194), then srun's line.
GPU_FAULT = b"RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
USER_ERROR = b"Traceback (most recent call last):\nModuleNotFoundError: No module named 'wandb'\n"

LEDGER = {
    "NODE_SCORE_HALF_LIFE_HOURS": 72.0,
    "NODE_HEALTHY_JOB_FACTOR": 0.5,
    "NODE_SUSPECT_SCORE": 1.0,
    "NODE_BAD_SCORE": 2.5,
    "NODE_BAD_MIN_USERS": 1,
}


@pytest.fixture
def cluster(db):
    return factories.cluster()


@pytest.fixture
def run(project, member, cluster, django_capture_on_commit_callbacks):
    """End an attempt on `node_list` with `state` and `log`, then poll it through the
    failure and ledger watchers, as one poll does."""

    def ended(node_list: str, log: bytes, state: str = State.FAILED, user=None) -> Attempt:
        nodes = node_list.count(",") + 1
        _, attempt = factories.job(project, user or member, cluster, nodes=nodes)
        code = 0 if state == State.COMPLETED else 1
        Attempt.objects.filter(pk=attempt.pk).update(
            state=state, exit_code=code, node_list=node_list, files_complete=True
        )
        attempt.refresh_from_db()
        files = log_files(attempt_ids=[attempt.pk], names=["stdout.log"])
        log_store(files=files, deliveries=[Delivery(attempt.pk, "stdout.log", 0, log)])
        reply = AgentReply(time=0.0)
        with django_capture_on_commit_callbacks(execute=True):
            FailureWatcher().ingest([attempt], reply)
            NodeLedgerWatcher().ingest([attempt], reply)
        return attempt

    return ended


def _verdict(cluster, node: str) -> str:
    return NodeHealth.objects.get(cluster=cluster, node=node).verdict


@override_settings(**LEDGER)
def test_three_gpu_faults_make_a_node_bad_and_avoided_and_staff_are_told(
    run, cluster, staff
) -> None:
    staff.email = "ops@example.org"
    staff.save()
    first = run("n2", GPU_FAULT)
    assert first.failure_class == FailureClass.GPU_HARDWARE
    event = NodeEvent.objects.get(attempt=first)
    assert (event.node, event.kind, event.weight) == ("n2", NodeSignal.GPU_HARDWARE, 1.0)
    assert "uncorrectable ECC error" in event.detail
    assert _verdict(cluster, "n2") == "suspect"
    run("n2", GPU_FAULT)
    assert avoided_nodes(cluster=cluster) == {}
    third = run("n2", GPU_FAULT)
    assert _verdict(cluster, "n2") == "bad"
    period = avoided_nodes(cluster=cluster)["n2"]
    # Every job's page shows the reason: it names no one's jobs; the staff's mail does.
    assert period.reason == "judged bad (score 3.0): 3 x GPU hardware fault"
    assert [m.subject for m in mail.outbox] == [
        f"[portal] node n2 of {cluster.name} is bad and avoided"
    ]
    assert mail.outbox[0].to == ["ops@example.org"]
    assert f"#{first.job_id}" in mail.outbox[0].body and f"#{third.job_id}" in mail.outbox[0].body
    run("n2", GPU_FAULT)  # still bad, avoided already: no second period, no second mail
    assert len(mail.outbox) == 1


@override_settings(**LEDGER)
def test_healthy_nodes_are_never_blamed(run, cluster) -> None:
    run("n1,n3", b"step 100, loss=0.1\n", state=State.COMPLETED)
    crashed = run("n1", USER_ERROR)  # the user's own error: no node's fault
    assert crashed.failure_class == FailureClass.MISSING_MODULE
    assert not NodeEvent.objects.filter(weight__gt=0).exists()
    assert set(
        NodeEvent.objects.filter(kind=NodeSignal.HEALTHY).values_list("node", flat=True)
    ) == {"n1", "n3"}
    assert NodeHealth.objects.get(cluster=cluster, node="n1").healthy_jobs == 1
    assert set(NodeHealth.objects.values_list("verdict", flat=True)) == {"healthy"}
    assert avoided_nodes(cluster=cluster) == {}


@override_settings(**LEDGER)
def test_healthy_jobs_since_a_fault_bring_a_node_back_to_healthy(run, cluster) -> None:
    run("n2", GPU_FAULT)
    run("n2", GPU_FAULT)
    assert _verdict(cluster, "n2") == "suspect"
    run("n2", b"done\n", state=State.COMPLETED)
    # Each fault halved by the healthy job run since: 2 x 0.5 = 1.0, still suspect.
    assert NodeHealth.objects.get(cluster=cluster, node="n2").score == pytest.approx(1.0, abs=1e-3)
    run("n2", b"done\n", state=State.COMPLETED)
    assert _verdict(cluster, "n2") == "healthy"


@override_settings(**LEDGER)
def test_an_attempt_counts_once(run, cluster) -> None:
    attempt = run("n2", GPU_FAULT)
    NodeLedgerWatcher().ingest([attempt], AgentReply(time=0.0))
    assert NodeEvent.objects.filter(attempt=attempt).count() == 1


@override_settings(**LEDGER)
def test_a_cleared_node_starts_afresh(run, cluster, staff) -> None:
    for _ in range(3):
        run("n2", GPU_FAULT)
    assert "n2" in avoided_nodes(cluster=cluster)
    node_avoid_clear(cluster=cluster, node="n2", user=staff)
    assert avoided_nodes(cluster=cluster) == {}
    run("n2", GPU_FAULT)  # one fault after the clear: suspect, not bad again
    assert _verdict(cluster, "n2") == "suspect"
    assert avoided_nodes(cluster=cluster) == {}


@override_settings(**{**LEDGER, "NODE_BAD_MIN_USERS": 2})
def test_one_persons_jobs_alone_never_make_a_node_bad(run, cluster, owner) -> None:
    for _ in range(4):
        run("n2", GPU_FAULT)  # all the member's: they could have printed the line anywhere
    assert _verdict(cluster, "n2") == "suspect"
    assert avoided_nodes(cluster=cluster) == {}
    run("n2", GPU_FAULT, user=owner)  # a second person's job fails there too
    assert _verdict(cluster, "n2") == "bad"
    assert "n2" in avoided_nodes(cluster=cluster)


@override_settings(**LEDGER)
def test_a_completed_jobs_healthy_nodes_cost_the_same_queries_for_two_or_eight(
    project, member, cluster
) -> None:
    counts = []
    for nodes in ("n1,n2", "n1,n2,n3,n4,n5,n6,n7,n8"):
        _, attempt = factories.job(project, member, cluster, nodes=nodes.count(",") + 1)
        Attempt.objects.filter(pk=attempt.pk).update(state=State.COMPLETED, node_list=nodes)
        attempt.refresh_from_db()
        with CaptureQueriesContext(connection) as queries:
            assert attempt_nodes_record(attempt=attempt, cluster=cluster)
        counts.append(len(queries))
    assert counts[0] == counts[1]
    assert NodeHealth.objects.get(cluster=cluster, node="n2").healthy_jobs == 2
