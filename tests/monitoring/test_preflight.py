"""An attempt its preflight ended: the faulty node is recorded in the ledger, left out of the
job, and the job submitted again without it, using none of its restarts; capped, fitted,
and only believed of the attempt's own nodes and its preflight's status."""

import json
from typing import cast

import pytest
from django.test import override_settings

from clusters.agent import AgentReply, FileChunk
from clusters.slurm import Partition, Slurm, SlurmError, parse_partitions
from jobs.enums import FailureClass, State
from jobs.models import Attempt, JobEvent
from jobs.preflight import preflight_fit, preflight_report
from jobs.restart import restart_decision
from jobs.rundir import PREFLIGHT_EXIT, PREFLIGHT_FILE
from jobs.scripts import RunDir, render_batch_script
from monitoring.diagnosis.failures import FailureWatcher
from monitoring.diagnosis.preflight import PreflightWatcher
from monitoring.models import NodeEvent, NodeSignal
from monitoring.nodes.watch import NodeLedgerWatcher
from tests import factories
from tests.clusters.slurm_output import fixture

# What `portal_preflight.py merge` wrote on the sandbox for n[1-2], n2's GPU 1 faulty.
N2_FAULTY = (
    '{"ok": false, "nodes": {"n1": {"node": "n1", "ok": true, "gpu": {"ok": true, "reason": ""}, '
    '"collective": {"ok": true, "reason": "", "backend": "gloo"}, "seconds": 2.91}, "n2": '
    '{"node": "n2", "ok": false, "gpu": {"ok": false, "reason": "GPU 1: 31582503 uncorrected '
    'ECC errors"}, "collective": {"ok": true, "reason": "", "backend": "gloo"}, "seconds": '
    "2.87}}}\n"
)
THREE_NODES = (
    fixture("scontrol_show_partition.txt")
    .replace("Nodes=n[1-2]", "Nodes=n[1-3]")
    .replace("TotalNodes=2", "TotalNodes=3")
)


class _Slurm:
    def __init__(self, fails: bool = False) -> None:
        self.fails = fails

    def partitions(self) -> list[Partition]:
        if self.fails:
            raise SlurmError("scontrol", "timed out", retryable=True)
        return parse_partitions(THREE_NODES)


@pytest.fixture
def ended(project, member, django_capture_on_commit_callbacks):
    """End a 2-node preflight job's attempt with `code`, its preflight.json `text`, and poll it
    through the preflight, failure and ledger watchers."""
    cluster = factories.cluster()
    account = factories.account(cluster, member)
    job, first = factories.job(
        project, member, cluster, nodes=2, partition="gpu", preflight=True, max_restarts=1
    )

    def poll(attempt: Attempt | None = None, text: str = N2_FAULTY, code: int = PREFLIGHT_EXIT):
        attempt = attempt or first
        Attempt.objects.filter(pk=attempt.pk).update(
            account=account,
            state=State.FAILED,
            exit_code=code,
            slurm_job_id=str(100 + attempt.number),
            node_list="n[1-2]",
            run_dir=f"/home/mia/portal-runs/a{attempt.number}",
        )
        attempt.refresh_from_db()
        chunk = FileChunk(0, text.encode(), len(text), False, None, 1)
        reply = AgentReply(time=0.0, files={f"{attempt.uuid}/{PREFLIGHT_FILE}": chunk})
        with django_capture_on_commit_callbacks(execute=False):
            for watcher in (PreflightWatcher(), FailureWatcher(), NodeLedgerWatcher()):
                watcher.ingest([attempt], reply)
        attempt.refresh_from_db()
        return attempt

    return job, first, poll


def test_the_faulty_node_is_recorded_left_out_and_the_job_resubmitted(ended) -> None:
    job, first, poll = ended
    poll()
    assert first.failure_class == FailureClass.PREFLIGHT
    assert first.diagnosis["preflight_nodes"] == {"n2": "GPU 1: 31582503 uncorrected ECC errors"}

    second = Attempt.objects.get(job=job, number=2)
    assert second.excluded_nodes == "n2" and second.state == State.QUEUED
    assert second.preflight_resubmits == 1
    event = JobEvent.objects.get(attempt=second)
    assert event.reason == (
        "Preflight found n2 faulty (n2: GPU 1: 31582503 uncorrected ECC errors); resubmitted "
        "without it (preflight resubmission 1 of at most 3, not a restart)."
    )
    script = render_batch_script(job=job, attempt=second, run_dir=RunDir("/r/2"))
    assert "#SBATCH --exclude=n2" in script

    # The ledger: n2 blamed with the attempt as evidence, n1 not.
    (signal,) = NodeEvent.objects.exclude(kind=NodeSignal.HEALTHY)
    assert (signal.node, signal.kind, signal.attempt_id) == ("n2", NodeSignal.PREFLIGHT, first.pk)
    assert signal.detail == "Preflight: GPU 1: 31582503 uncorrected ECC errors"
    # No restart used: the job's one restart is still there for a failure of its own.
    assert restart_decision(job=job, attempt=second, failure_class=FailureClass.RANK_CRASH).restart


def test_preflight_resubmissions_are_capped(ended) -> None:
    job, _, poll = ended
    with override_settings(PREFLIGHT_MAX_RESUBMITS=1):
        poll()
        second = Attempt.objects.get(job=job, number=2)
        poll(second)
    assert not Attempt.objects.filter(job=job, number=3).exists()
    assert JobEvent.objects.filter(attempt=second).latest("id").reason == (
        "Preflight found n2 faulty (n2: GPU 1: 31582503 uncorrected ECC errors); not submitted "
        "again: 1 preflight resubmissions already (PREFLIGHT_MAX_RESUBMITS)."
    )


def test_a_resubmission_that_would_not_fit_is_refused(ended) -> None:
    job, _, poll = ended
    poll()
    second = Attempt.objects.get(job=job, number=2)
    preflight_fit(attempt=second, slurm=cast(Slurm, _Slurm()))  # 2 of n[1-3] left: fits
    Attempt.objects.filter(pk=second.pk).update(excluded_nodes="n2,n3")
    second.refresh_from_db()
    with pytest.raises(SlurmError) as refused:
        preflight_fit(attempt=second, slurm=cast(Slurm, _Slurm()))
    assert not refused.value.retryable
    assert refused.value.slurm_message == (
        "leaving out n2 and n3 would leave partition gpu 1 of its 3 nodes, and the job needs 2: "
        "not submitted again."
    )
    preflight_fit(attempt=second, slurm=cast(Slurm, _Slurm(fails=True)))  # Slurm decides


def test_only_the_preflights_own_status_is_believed(ended) -> None:
    job, first, poll = ended
    poll(code=1)  # the command ended the attempt: whatever the file says is not the preflight's
    assert first.failure_class != FailureClass.PREFLIGHT
    assert not NodeEvent.objects.filter(kind=NodeSignal.PREFLIGHT).exists()
    assert not Attempt.objects.filter(job=job, number=2).exists()


def test_a_node_outside_the_allocation_is_never_named(ended) -> None:
    _, _, poll = ended
    forged = N2_FAULTY.replace('"n2"', '"n9"')  # n9 is another job's node
    poll(text=forged)
    report = preflight_report(forged, ["n1", "n2"])
    assert "n9" not in report.faulty
    assert not NodeEvent.objects.filter(node="n9").exists()


def test_a_failed_all_reduce_names_no_node_when_every_node_failed_it() -> None:
    gpu = {"ok": True, "reason": ""}
    result = {
        n: {"ok": False, "gpu": gpu, "collective": {"ok": False, "reason": "timed out"}}
        for n in ("n1", "n2")
    }
    text = json.dumps({"ok": False, "nodes": result})
    report = preflight_report(text, ["n1", "n2"])
    assert report.faulty == {}
    assert report.unnamed == "the all-reduce failed on every node (timed out)"
    one = preflight_report(text, ["n1", "n2", "n3"])  # n3 answered nothing: it is named
    assert list(one.faulty) == ["n3"]
    assert preflight_report("not json", ["n1"]).unnamed == "its result could not be read"


def test_every_node_failing_the_same_way_blames_none() -> None:
    missing = {"ok": False, "reason": "nvidia-smi failed (127): nvidia-smi not found"}
    result = {n: {"ok": False, "gpu": missing, "collective": {"ok": True}} for n in ("n1", "n2")}
    report = preflight_report(json.dumps({"ok": False, "nodes": result}), ["n1", "n2"])
    assert report.faulty == {}
    assert report.unnamed == (
        "every node failed the same way (nvidia-smi failed (127): nvidia-smi not found)"
    )
    # One node alone is named, whatever its reason.
    alone = preflight_report(json.dumps({"ok": False, "nodes": {"n1": result["n1"]}}), ["n1"])
    assert list(alone.faulty) == ["n1"]


def test_no_named_node_no_resubmission(ended) -> None:
    job, first, poll = ended
    poll(text="")
    assert first.failure_class == FailureClass.PREFLIGHT
    assert not Attempt.objects.filter(job=job, number=2).exists()
    assert JobEvent.objects.filter(attempt=first).latest("id").reason == (
        "Preflight failed: its result could not be read; no node can be named, so the job is "
        "not submitted again."
    )
