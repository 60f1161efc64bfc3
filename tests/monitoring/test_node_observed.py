"""What the portal itself saw on an ended attempt's nodes, through the poll's ingest and the
ledger: uncorrected ECC errors that rose in the GPU samples, and a persistent straggler."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail
from django.test import override_settings

from clusters.agent import AgentReply
from clusters.avoidance import avoided_nodes
from jobs.enums import State
from jobs.models import Attempt
from monitoring.diagnosis.failures import FailureWatcher
from monitoring.logs.store import Delivery, log_files, log_store
from monitoring.models import NodeEvent, NodeHealth, NodeSignal
from monitoring.nodes.watch import NodeLedgerWatcher
from tests import factories
from tests.security.ingest_helpers import ingest, reply_with, running

LEDGER = {
    "NODE_SCORE_HALF_LIFE_HOURS": 72.0,
    "NODE_HEALTHY_JOB_FACTOR": 0.5,
    "NODE_SUSPECT_SCORE": 1.0,
    "NODE_BAD_SCORE": 2.5,
    "NODE_BAD_MIN_USERS": 2,
}
START = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _line(second: int, index: int, util: int, faults: str) -> str:
    """One line as the sampler writes it (jobs.rundir.GPU_QUERY_FIELDS, nounits)."""
    stamp = (START + timedelta(seconds=second)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    uuid = f"GPU-5f1c2b7e-8d3a-4c1e-9f6b-0a1b2c3d4e{index:02d}"
    return f"{stamp}, {index}, {uuid}, {util}, 40321, 143771, 51, 412.35, {faults}\n"


def _samples(seconds: int, *, util: int = 90, faults=lambda second, index: "0, 0, [N/A]") -> bytes:
    return "".join(
        _line(s, i, util, faults(s, i)) for s in range(seconds) for i in range(2)
    ).encode()


@pytest.fixture
def cluster(db):
    return factories.cluster()


@pytest.fixture
def run(project, member, cluster, django_capture_on_commit_callbacks):
    """An attempt on `nodes` that wrote `gpu` (node -> sampler bytes) through the poll's
    ingest, then ended with `state` and `log` and went through the failure and ledger
    watchers, as the poll does."""

    def ended(nodes: str, gpu: dict[str, bytes], *, state=State.FAILED, log=b"", user=None):
        _, attempt = factories.job(
            project, user or member, cluster, nodes=len(gpu), gpus_per_node=2
        )
        placed = running(attempt, nodes=nodes)
        names = [f"gpu-{n}.csv" for n in gpu]
        ingest([placed], reply_with({}, listings={placed: names}))
        ingest([placed], reply_with({placed: {f"gpu-{n}.csv": b for n, b in gpu.items()}}))
        code = 0 if state == State.COMPLETED else 1
        Attempt.objects.filter(pk=attempt.pk).update(
            state=state, exit_code=code, files_complete=True, ended_at=START + timedelta(hours=1)
        )
        attempt.refresh_from_db()
        files = log_files(attempt_ids=[attempt.pk], names=["stdout.log"])
        log_store(files=files, deliveries=[Delivery(attempt.pk, "stdout.log", 0, log)])
        with django_capture_on_commit_callbacks(execute=True):
            FailureWatcher().ingest([attempt], AgentReply(time=0.0))
            NodeLedgerWatcher().ingest([attempt], AgentReply(time=0.0))
            NodeLedgerWatcher().ingest([attempt], AgentReply(time=0.0))  # a second poll
        return attempt

    return ended


def _rising(second: int, index: int) -> str:
    """GPU 1's uncorrected count rises from 4 (left from before) to 6; GPU 0 stays at 0."""
    return f"{4 + min(second // 3, 2) if index == 1 else 0}, 10, No"


@override_settings(**LEDGER)
def test_a_rise_of_uncorrected_ecc_in_the_samples_blames_the_node_once(run, cluster) -> None:
    attempt = run("n2", {"n2": _samples(10, faults=_rising)}, state=State.COMPLETED, log=b"ok\n")
    event = NodeEvent.objects.get(cluster=cluster, kind=NodeSignal.GPU_ECC)
    assert (event.node, event.attempt_id, event.weight) == ("n2", attempt.pk, 1.0)
    assert "GPU 1 from 4 to 6" in event.detail and "GPU 0" not in event.detail
    # Its job completed, but a node whose memory failed meanwhile ran no healthy job.
    assert not NodeEvent.objects.filter(kind=NodeSignal.HEALTHY).exists()
    assert NodeHealth.objects.get(cluster=cluster, node="n2").verdict == "suspect"


@override_settings(**LEDGER)
def test_a_count_left_from_before_or_not_available_blames_no_one(run, cluster) -> None:
    old = _samples(10, faults=lambda s, i: "7, 300, Yes")
    na = _samples(10, faults=lambda s, i: "[N/A], [N/A], [N/A]")
    unsupported = _samples(10, faults=lambda s, i: "[Not Supported], [Not Supported], [N/A]")
    for node, data in (("n1", old), ("n2", na), ("n3", unsupported)):
        run(node, {node: data}, state=State.COMPLETED, log=b"ok\n")
    assert not NodeEvent.objects.filter(cluster=cluster, weight__gt=0).exists()
    assert set(
        NodeEvent.objects.filter(kind=NodeSignal.HEALTHY).values_list("node", flat=True)
    ) == {"n1", "n2", "n3"}


@override_settings(**LEDGER)
def test_ecc_rises_with_cuda_errors_make_a_node_bad_only_from_two_peoples_jobs(
    run, cluster, owner, staff
) -> None:
    staff.email = "ops@example.org"
    staff.save()
    fault = b"RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
    for _ in range(2):
        run("n2", {"n2": _samples(10, faults=_rising)}, log=fault)
    kinds = NodeEvent.objects.filter(node="n2").values_list("kind", flat=True)
    assert sorted(kinds) == ["gpu_ecc", "gpu_ecc", "gpu_hardware", "gpu_hardware"]
    # Over the bad score, but the samples sit in a run directory the job can write:
    # one person's jobs alone still make the node suspect only.
    health = NodeHealth.objects.get(cluster=cluster, node="n2")
    assert health.score > 2.5 and health.verdict == "suspect"
    assert mail.outbox == []
    last = run("n2", {"n2": _samples(10, faults=_rising)}, log=fault, user=owner)
    assert NodeHealth.objects.get(cluster=cluster, node="n2").verdict == "bad"
    reason = avoided_nodes(cluster=cluster, at=last.ended_at)["n2"].reason
    assert "3 x GPU hardware fault" in reason and "3 x Uncorrected ECC errors" in reason
    # The staff hear of it once, by mail (alert rules are each person's, about their jobs).
    assert [m.subject for m in mail.outbox] == [
        f"[portal] node n2 of {cluster.name} is bad and avoided"
    ]
    assert f"#{last.job_id}" in mail.outbox[0].body


@override_settings(**LEDGER)
def test_a_node_behind_the_others_for_the_whole_run_gets_a_straggler_signal(run, cluster) -> None:
    fast, slow = _samples(90, util=95), _samples(90, util=10)
    run("n[1-2]", {"n1": fast, "n2": slow}, state=State.COMPLETED, log=b"ok\n")
    blamed = NodeEvent.objects.filter(cluster=cluster, weight__gt=0)
    assert [(e.node, e.kind, e.weight) for e in blamed] == [("n2", "straggler", 0.3)]
    assert "GPU 0 on node n2 runs at 10% utilisation" in blamed[0].detail
    healthy = NodeEvent.objects.filter(kind=NodeSignal.HEALTHY).values_list("node", flat=True)
    assert list(healthy) == ["n1"]
    assert NodeHealth.objects.get(cluster=cluster, node="n2").verdict == "healthy"  # a hint


@override_settings(**LEDGER)
def test_nodes_that_kept_pace_are_no_stragglers(run, cluster) -> None:
    even = _samples(90, util=90)
    run("n[1-2]", {"n1": even, "n2": even}, state=State.COMPLETED, log=b"ok\n")
    assert not NodeEvent.objects.filter(cluster=cluster, weight__gt=0).exists()
