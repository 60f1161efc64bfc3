"""The restart policy: which failures restart, from which checkpoint, and what the timeline says."""

import pytest

from clusters.agent import AgentReply, Listing, ListingEntry
from clusters.slurm.hostlist import expand_nodes
from jobs.enums import FailureClass, State
from jobs.models import Attempt, JobEvent, default_restart_on
from jobs.restart import attempt_restart, restart_decision
from jobs.scripts import RunDir, render_batch_script
from jobs.specs import validate_spec
from monitoring.diagnosis.failures import FailureWatcher
from monitoring.logs.store import Delivery, log_files, log_store
from monitoring.models import Checkpoint
from tests import factories
from tests.corpus.loader import FAILURES_DIR

RANK_CRASH_LOG = b"""step 20, loss=0.0712
checkpoint step-20.pt saved (31277 bytes)
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_04:20:10
  host      : sandbox
  rank      : 1 (local_rank: 0)
  exitcode  : -9 (pid: 18835)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 18835
srun: error: n2: task 1: Exited with exit code 1
srun: error: n1: task 0: Terminated
"""
CUDA_OOM_LOG = b"[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"


@pytest.fixture
def failed(project, member):
    """A 2-node job with 2 restarts whose first attempt just failed."""
    cluster = factories.cluster()
    account = factories.account(cluster, member)
    job, attempt = factories.job(project, member, cluster, nodes=2, gpus_per_node=1, max_restarts=2)
    Attempt.objects.filter(pk=attempt.pk).update(
        account=account,
        state=State.FAILED,
        exit_code=1,
        slurm_job_id="77",
        node_list="n[1-2]",
        run_dir="/home/mia/portal-runs/a1",
    )
    attempt.refresh_from_db()
    job.state = State.FAILED
    job.save()
    return job, attempt


def _last_note(attempt: Attempt) -> str:
    event = JobEvent.objects.filter(attempt=attempt).last()
    assert event is not None
    return event.reason


def _finish_poll(attempt: Attempt, log: bytes, names: list[tuple[str, int]]) -> None:
    """What the poll that read the attempt's last bytes hands the failure watcher."""
    files = log_files(attempt_ids=[attempt.pk], names=["stdout.log"])
    log_store(files=files, deliveries=[Delivery(attempt.pk, "stdout.log", 0, log)])
    listing = Listing(
        entries=tuple(
            ListingEntry(n, size, 1796000000.0 + i, False) for i, (n, size) in enumerate(names)
        ),
        error=None,
        truncated=False,
    )
    reply = AgentReply(time=0.0, listings={f"{attempt.uuid}/checkpoints": listing})
    FailureWatcher().ingest([attempt], reply)


def test_a_crashed_rank_restarts_from_the_latest_complete_checkpoint(
    failed, django_capture_on_commit_callbacks
) -> None:
    job, attempt = failed
    with django_capture_on_commit_callbacks() as queued:
        _finish_poll(
            attempt,
            RANK_CRASH_LOG,
            [("step-10.pt", 31277), ("step-20.pt", 31277), (".step-25.pt.4242.tmp", 9000)],
        )
    attempt.refresh_from_db()
    assert attempt.failure_class == FailureClass.RANK_CRASH
    assert attempt.diagnosis["rank"] == 1 and attempt.diagnosis["node"] == "n2"
    assert Checkpoint.objects.filter(attempt=attempt, complete=False).count() == 1

    second = Attempt.objects.get(job=job, number=2)
    assert second.resume_from == "/home/mia/portal-runs/a1/checkpoints/step-20.pt"
    assert second.state == State.QUEUED and second.account_id == attempt.account_id
    assert second.excluded_nodes == ""  # the job keeps all nodes unless it asks
    job.refresh_from_db()
    assert job.state == State.QUEUED
    event = JobEvent.objects.get(attempt=second)
    assert "Restart 1/2 after A rank crashed on attempt 1" in event.reason
    assert "from step 20" in event.reason
    assert len(queued) == 1  # the submission, after the commit

    # The script of attempt 2 hands the checkpoint to the trainer.
    script = render_batch_script(job=job, attempt=second, run_dir=RunDir("/r/2"))
    assert "export PORTAL_RESUME_FROM=/home/mia/portal-runs/a1/checkpoints/step-20.pt" in script


def test_a_diagnosis_and_a_restart_happen_once(failed) -> None:
    job, attempt = failed
    _finish_poll(attempt, RANK_CRASH_LOG, [("step-20.pt", 10)])
    # A redelivered poll, or a second worker: nothing more.
    attempt.refresh_from_db()
    FailureWatcher().ingest([attempt], AgentReply(time=0.0))
    stale = Attempt.objects.get(pk=attempt.pk)
    stale.diagnosed_at = None
    attempt_restart(attempt=stale, failure_class=FailureClass.RANK_CRASH, resume_from="")
    assert Attempt.objects.filter(job=job).count() == 2


def test_cuda_oom_never_restarts_and_says_why(failed) -> None:
    job, attempt = failed
    job.restart_on = [c.value for c in FailureClass]  # even a policy that asks for everything
    job.save()
    _finish_poll(attempt, CUDA_OOM_LOG, [("step-20.pt", 10)])
    attempt.refresh_from_db()
    assert attempt.failure_class == FailureClass.CUDA_OOM
    assert Attempt.objects.filter(job=job).count() == 1
    note = JobEvent.objects.filter(attempt=attempt).last()
    assert note is not None and "would fail again" in note.reason


def test_a_device_side_assert_never_restarts(failed) -> None:
    job, attempt = failed
    job.restart_on = [c.value for c in FailureClass]  # even a policy that asks for everything
    job.save()
    log = (FAILURES_DIR / "device_assert_embedding_index_h200.log").read_bytes()
    _finish_poll(attempt, log, [])
    attempt.refresh_from_db()
    assert attempt.failure_class == FailureClass.DEVICE_ASSERT
    assert Attempt.objects.filter(job=job).count() == 1
    assert "would fail again" in _last_note(attempt)


def test_a_diverged_run_restarts_only_when_its_policy_asks(failed) -> None:
    job, attempt = failed
    assert FailureClass.DIVERGED not in default_restart_on()
    job.restart_on = [FailureClass.DIVERGED.value]  # e.g. a trainer that skips batches on resume
    job.save()
    log = (FAILURES_DIR / "diverged_floating_point_error_h200.log").read_bytes()
    _finish_poll(attempt, log, [("step-20.pt", 10)])
    attempt.refresh_from_db()
    assert attempt.failure_class == FailureClass.DIVERGED
    assert Attempt.objects.filter(job=job).count() == 2


def test_a_log_not_yet_read_to_its_end_waits(failed) -> None:
    from clusters.agent import FileChunk

    job, attempt = failed
    more = FileChunk(offset=0, data=b"", size=10**6, more=True, error=None, inode=1)
    FailureWatcher().ingest(
        [attempt], AgentReply(time=0.0, files={f"{attempt.uuid}/stdout.log": more})
    )
    attempt.refresh_from_db()
    assert attempt.diagnosed_at is None
    assert Attempt.objects.filter(job=job).count() == 1


def test_restarts_run_out(failed) -> None:
    job, attempt = failed
    job.max_restarts = 1
    job.save()
    Attempt.objects.filter(pk=attempt.pk).update(number=2)
    attempt.refresh_from_db()
    assert (
        attempt_restart(attempt=attempt, failure_class=FailureClass.RANK_CRASH, resume_from="")
        is None
    )
    assert "all 1 restarts are used" in _last_note(attempt)


def test_no_restart_policy_no_restart(failed) -> None:
    job, attempt = failed
    job.max_restarts = 0
    job.save()
    assert (
        attempt_restart(attempt=attempt, failure_class=FailureClass.NODE_FAILURE, resume_from="")
        is None
    )
    assert Attempt.objects.filter(job=job).count() == 1


def test_a_class_outside_the_policy_does_not_restart(failed) -> None:
    job, attempt = failed
    decision = restart_decision(job=job, attempt=attempt, failure_class=FailureClass.TIME_LIMIT)
    assert not decision.restart and "does not restart after Time limit" in decision.why


def test_the_failed_node_is_excluded_when_the_job_asks(failed) -> None:
    job, attempt = failed
    job.exclude_failed_nodes = True
    job.save()
    Attempt.objects.filter(pk=attempt.pk).update(excluded_nodes="n7")
    attempt.refresh_from_db()
    new = attempt_restart(
        attempt=attempt, failure_class=FailureClass.NODE_FAILURE, resume_from="", failed_node="n1"
    )
    assert new is not None and new.excluded_nodes == "n7,n1"
    assert "without node n1" in JobEvent.objects.get(attempt=new).reason
    script = render_batch_script(job=job, attempt=new, run_dir=RunDir("/r/2"))
    assert "#SBATCH --exclude=n7,n1" in script


def test_a_quota_refusal_ends_the_job_instead(failed) -> None:
    from datetime import timedelta

    from projects.models import Quota

    job, attempt = failed
    # The project lowered its wall-time limit since the job was submitted.
    Quota.objects.filter(project=job.project).update(max_wall_time=timedelta(minutes=5))
    restarted = attempt_restart(
        attempt=attempt, failure_class=FailureClass.RANK_CRASH, resume_from=""
    )
    assert restarted is None
    assert Attempt.objects.filter(job=job).count() == 1  # nothing half-created
    job.refresh_from_db()
    assert job.state == State.FAILED
    note = _last_note(attempt)
    assert note.startswith("Not restarted: ") and "shorten the time limit" in note


def test_the_spec_refuses_a_policy_that_cannot_work() -> None:
    errors = validate_spec(
        spec=factories.spec(max_restarts=99, restart_on=("cuda_oom", "gremlins")),
        partitions={"gpu": factories.GPU_PARTITION},
        quota=None,
    )
    assert errors["max_restarts"] == ["Allow between 0 and 20 restarts."]
    assert any("'gremlins'" in e for e in errors["restart_on"])
    assert any("CUDA out of memory" in e and "remove it" in e for e in errors["restart_on"])


def test_node_lists_expand() -> None:
    assert expand_nodes("n[1-2]") == ["n1", "n2"]
    assert expand_nodes("gpu[08-10,12],login1") == ["gpu08", "gpu09", "gpu10", "gpu12", "login1"]
    assert expand_nodes("") == []
    assert expand_nodes("n[a-b]") == []  # garbled: no names rather than an error


def test_a_cancelled_job_is_not_restarted_and_needs_no_note(failed) -> None:
    job, attempt = failed
    Attempt.objects.filter(pk=attempt.pk).update(state=State.CANCELLED)
    attempt.refresh_from_db()
    events = JobEvent.objects.count()
    _finish_poll(attempt, b"step 3, loss=0.5\n", [("step-2.pt", 10)])
    attempt.refresh_from_db()
    assert attempt.failure_class == FailureClass.CANCELLED
    assert Attempt.objects.filter(job=job).count() == 1
    assert JobEvent.objects.count() == events


def test_a_completed_attempt_is_not_diagnosed_as_a_failure(failed) -> None:
    job, attempt = failed
    Attempt.objects.filter(pk=attempt.pk).update(state=State.COMPLETED, exit_code=0)
    attempt.refresh_from_db()
    _finish_poll(attempt, b"done at step 30\n", [("step-30.pt", 10)])
    attempt.refresh_from_db()
    assert attempt.diagnosed_at is not None and attempt.failure_class == ""
    assert attempt.diagnosis is None
    assert Attempt.objects.filter(job=job).count() == 1


def test_a_job_stopped_at_the_time_limit_warning_resumes_when_its_policy_says(failed) -> None:
    job, attempt = failed
    job.restart_on = [*job.restart_on, FailureClass.TIME_LIMIT]
    job.save()
    Attempt.objects.filter(pk=attempt.pk).update(state=State.COMPLETED, exit_code=0)
    attempt.refresh_from_db()
    log = (
        b"portal: SIGUSR1 before the time limit, passed to the steps\n"
        b"checkpoint step-42.pt saved (31277 bytes)\n"
        b"stopping after step 42 on SIGUSR1 (another rank's or ours)\n"
    )
    _finish_poll(attempt, log, [("step-40.pt", 10), ("step-42.pt", 10)])
    second = Attempt.objects.get(job=job, number=2)
    assert second.resume_from.endswith("/checkpoints/step-42.pt")
    assert "after Time limit on attempt 1" in JobEvent.objects.get(attempt=second).reason


def test_only_a_node_of_the_attempt_is_excluded(failed) -> None:
    job, attempt = failed
    job.exclude_failed_nodes = True
    job.save()
    # torchrun names the host ("gpu-host-7.cluster"), srun did not say: nothing to exclude.
    log = RANK_CRASH_LOG.replace(b"host      : sandbox", b"host      : gpu-host-7.cluster")
    log = b"\n".join(line for line in log.splitlines() if not line.startswith(b"srun"))
    _finish_poll(attempt, log, [("step-20.pt", 10)])
    second = Attempt.objects.get(job=job, number=2)
    assert second.excluded_nodes == ""


# Real text: the error line of a job on a node with a failing GPU (jade-hpc-gpu issue 194,
# https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/194), then srun's task line.
GPU_FAULT_LOG = b"""step 20, loss=0.0712
RuntimeError: CUDA error: uncorrectable ECC error encountered
srun: error: n2: task 1: Exited with exit code 1
"""


def test_a_gpu_fault_restarts_without_its_node_even_unasked(failed) -> None:
    job, attempt = failed
    assert not job.exclude_failed_nodes
    _finish_poll(attempt, GPU_FAULT_LOG, [("step-20.pt", 10)])
    attempt.refresh_from_db()
    assert attempt.failure_class == FailureClass.GPU_HARDWARE
    assert attempt.diagnosis["node"] == "n2"
    second = Attempt.objects.get(job=job, number=2)
    assert second.excluded_nodes == "n2"
    assert "without node n2" in JobEvent.objects.get(attempt=second).reason
    script = render_batch_script(job=job, attempt=second, run_dir=RunDir("/r/2"))
    assert "#SBATCH --exclude=n2" in script


def test_a_gpu_fault_on_a_kernel_log_host_excludes_that_node(failed) -> None:
    job, attempt = failed
    # The syslog form of an Xid (open-gpu-kernel-modules issue 1150's message, host added
    # by syslog): the host name is the node's, qualified by its domain.
    log = (
        b"Mar  3 04:05:06 n1.cluster kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, "
        b"name=python3, Ch 00000001 caused by previous Xid 149\n"
    )
    _finish_poll(attempt, log, [])
    second = Attempt.objects.get(job=job, number=2)
    assert second.excluded_nodes == "n1"


def test_gpu_hardware_is_restarted_by_default() -> None:
    assert FailureClass.GPU_HARDWARE in default_restart_on()
