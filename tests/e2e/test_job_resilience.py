"""Failures on the way: lost sbatch replies, killed workers, changed host keys, sshd down."""

import shlex
import shutil

import pytest
from django.conf import settings

from clusters.models import Cluster
from clusters.sandbox import config
from clusters.slurm import Slurm
from clusters.slurm.tools import DEFAULT_SLURM_BIN_DIR
from clusters.ssh import SSHError
from devtools.keys import new_key_pair
from jobs.enums import State
from jobs.models import Attempt, Job
from jobs.poll.cycle import cluster_poll
from jobs.services import job_submit
from jobs.submission import SubmitRetry, attempt_submit
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, wait_for, worker_tag

# Each test disturbs only its own cluster row, worker, Celery process or private sshd, so
# they share the sandbox with the rest.
pytestmark = pytest.mark.sandbox


def _slurm_jobs_named(alice, name: str) -> list[str]:
    result = alice.run(f"squeue --noheader --states=all --format=%i --name={shlex.quote(name)}")
    return result.text.split()


def _queued_attempt(researcher, project, cluster, monkeypatch, **overrides: object) -> Attempt:
    """A job recorded by job_submit, whose queued task we run ourselves."""
    monkeypatch.setattr("jobs.services._queue_submission", lambda attempt_id: None)
    job = job_submit(user=researcher, project=project, cluster=cluster, spec=spec(**overrides))
    return Attempt.objects.get(job=job)


def test_lost_sbatch_reply_is_adopted_not_resubmitted(
    researcher, project, sandbox_cluster, alice, monkeypatch
) -> None:
    attempt = _queued_attempt(researcher, project, sandbox_cluster, monkeypatch, command="sleep 5")
    real_submit = Slurm.submit

    def accepted_then_cut(self: Slurm, script_path: str) -> str:
        real_submit(self, script_path)  # Slurm accepts the job...
        self.connection.close()  # ...and the connection dies before we read the id.
        raise SSHError("Lost the connection to cluster 'sandbox'", retryable=True)

    monkeypatch.setattr(Slurm, "submit", accepted_then_cut)
    with pytest.raises(SubmitRetry):
        attempt_submit(attempt_id=attempt.pk)
    attempt.refresh_from_db()
    assert attempt.state == State.SUBMITTING

    monkeypatch.setattr(Slurm, "submit", real_submit)
    attempt_submit(attempt_id=attempt.pk)  # the task's retry
    attempt.refresh_from_db()
    ids = _slurm_jobs_named(alice, attempt.slurm_job_name)
    assert ids == [attempt.slurm_job_id]
    assert attempt.state in (State.PENDING, State.RUNNING)
    reasons = list(attempt.events.order_by("time", "id").values_list("reason", flat=True))
    assert f"Adopted Slurm job {attempt.slurm_job_id}, submitted by an earlier try." in reasons
    attempt_submit(attempt_id=attempt.pk)  # a redelivered duplicate is a no-op
    assert _slurm_jobs_named(alice, attempt.slurm_job_name) == ids


def test_a_retry_after_the_job_ran_and_left_the_queue_adopts_it(
    researcher, project, sandbox_cluster, alice, monkeypatch
) -> None:
    """A worker down for longer than Slurm keeps finished jobs in squeue (MinJobAge),
    on a cluster without accounting: the retry must not run the job a second time."""
    attempt = _queued_attempt(researcher, project, sandbox_cluster, monkeypatch, command="echo ran")
    real_submit = Slurm.submit
    submitted: list[str] = []

    def accepted_then_cut(self: Slurm, script_path: str) -> str:
        submitted.append(real_submit(self, script_path))
        raise SSHError("Lost the connection to cluster 'sandbox'", retryable=True)

    monkeypatch.setattr(Slurm, "submit", accepted_then_cut)
    with pytest.raises(SubmitRetry):
        attempt_submit(attempt_id=attempt.pk)
    attempt.refresh_from_db()
    exit_file = shlex.quote(f"{attempt.run_dir}/exit_code")
    wait_for(lambda: alice.run(f"cat {exit_file}").text.strip() == "0", 60, "the job to end")

    # Slurm has forgotten the job by the time the retry comes (aged out of squeue, no
    # sacct): only its run directory remembers it.
    monkeypatch.setattr(Slurm, "find_by_name", lambda self, name, since=None: [])

    def must_not_submit(self: Slurm, script_path: str) -> str:
        raise AssertionError("the retry submitted the job a second time")

    monkeypatch.setattr(Slurm, "submit", must_not_submit)
    attempt_submit(attempt_id=attempt.pk)
    attempt.refresh_from_db()
    assert attempt.slurm_job_id == submitted[0]
    assert attempt.state == State.PENDING  # the next poll reads how it ended
    assert any(
        r.startswith(f"Adopted Slurm job {submitted[0]}")
        for r in attempt.events.values_list("reason", flat=True)
    )

    def polled_to_the_end() -> bool:
        # The portal account's squeue decides: it may show the job COMPLETING first.
        cluster_poll(cluster_id=sandbox_cluster.pk)
        attempt.refresh_from_db()
        return attempt.is_finished

    wait_for(polled_to_the_end, QUEUE_WAIT, "the poll to read how the job ended")
    assert (attempt.state, attempt.exit_code) == (State.COMPLETED, 0)


def test_worker_killed_mid_submission_makes_one_job(
    celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    # sbatch on the cluster answers slowly: Slurm has the job, the worker not yet its id.
    # The portal runs Slurm by absolute path from the cluster's bin directory, so the slow
    # sbatch goes in a directory of its own, beside links to the real other commands.
    slow = config.Paths.of(settings.SANDBOX_STATE_DIR).bin.parent / f"slow-slurm-{worker_tag()}"
    shutil.rmtree(slow, ignore_errors=True)
    slow.mkdir(mode=0o755)
    for command in ("sacct", "sacctmgr", "scancel", "scontrol", "sinfo", "squeue"):
        (slow / command).symlink_to(f"/usr/bin/{command}")
    shim = slow / "sbatch"
    shim.write_text('#!/bin/sh\n/usr/bin/sbatch "$@"; code=$?; sleep 5; exit $code\n')
    shim.chmod(0o755)
    Cluster.objects.filter(pk=sandbox_cluster.pk).update(slurm_bin_dir=str(slow))
    try:
        job = job_submit(
            user=researcher, project=project, cluster=sandbox_cluster, spec=spec(command="sleep 2")
        )
        attempt = Attempt.objects.get(job=job)
        wait_for(
            lambda: _slurm_jobs_named(alice, attempt.slurm_job_name),
            30,
            "Slurm to accept the job",
        )
        assert Attempt.objects.get(pk=attempt.pk).state == State.SUBMITTING
        celery_worker.kill()  # kill -9 while the worker waits for sbatch's reply
    finally:
        Cluster.objects.filter(pk=sandbox_cluster.pk).update(slurm_bin_dir=DEFAULT_SLURM_BIN_DIR)
        shutil.rmtree(slow, ignore_errors=True)
        celery_worker.start()
    wait_for(
        lambda: Attempt.objects.get(pk=attempt.pk).state == State.COMPLETED,
        60,
        "the reconciler to re-drive the submission and the job to complete",
    )
    attempt.refresh_from_db()
    assert _slurm_jobs_named(alice, attempt.slurm_job_name) == [attempt.slurm_job_id]
    assert "Adopted" in " ".join(attempt.events.values_list("reason", flat=True))


def test_changed_host_key_fails_the_attempt_and_submits_nothing(
    celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    _, impostor = new_key_pair()
    sandbox_cluster.host_key = impostor
    sandbox_cluster.save()
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(command="echo hi"),
        partitions={},
    )
    wait_for(lambda: Job.objects.get(pk=job.pk).state == State.FAILED, 30, "the attempt to fail")
    attempt = Attempt.objects.get(job=job)
    assert "Host key mismatch for cluster 'sandbox'" in attempt.reason
    assert "SHA256:" in attempt.reason
    assert attempt.slurm_job_id == ""
    assert _slurm_jobs_named(alice, attempt.slurm_job_name) == []


def test_sshd_down_shows_unknown_then_the_true_state(
    celery_worker, researcher, project, sandbox_cluster, private_sshd
) -> None:
    """The login node goes away (its sshd and every session through it), then comes back."""
    job = job_submit(
        user=researcher, project=project, cluster=sandbox_cluster, spec=spec(command="sleep 20")
    )
    wait_for(lambda: Job.objects.get(pk=job.pk).state == State.RUNNING, 60, "the job to run")
    try:
        private_sshd.stop()
        wait_for(lambda: Job.objects.get(pk=job.pk).state == State.UNKNOWN, 30, "unknown")
        attempt = Attempt.objects.get(job=job)
        assert attempt.reason.startswith("Cannot reach the cluster")
    finally:
        private_sshd.start()
    wait_for(
        lambda: Job.objects.get(pk=job.pk).state in (State.RUNNING, State.COMPLETED),
        30,
        "the true state after sshd is back",
    )
    wait_for(lambda: Job.objects.get(pk=job.pk).state == State.COMPLETED, 60, "completion")
