"""Handing an attempt to Slurm exactly once, whatever fails on the way."""

import logging
import shlex
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from clusters.agent.code import CodeShell, unpack_on_cluster
from clusters.errors import ClusterError
from clusters.selectors import account_endpoint
from clusters.slurm import Slurm, SlurmError, SqueueRow
from clusters.ssh import Connection, pool
from jobs.avoidance import attempt_avoid_nodes
from jobs.code.snapshots import job_code_fetch, snapshot_bytes
from jobs.enums import State
from jobs.errors import JobError
from jobs.models import Attempt
from jobs.preflight import preflight_fit
from jobs.rundir import CODE_ARCHIVE_FILE, CODE_DIR, SCRIPT_FILE, SLURM_JOB_ID_FILE, RunDir
from jobs.scripts import render_batch_script
from jobs.slurm_states import portal_state
from jobs.states import attempt_transition

logger = logging.getLogger(__name__)


class SubmitRetry(Exception):
    """A transient failure; the task retries, and the retry first looks for the job."""


def _attempt(attempt_id: int) -> Attempt:
    return Attempt.objects.select_related(
        "job", "job__project", "job__cluster", "job__code", "account", "account__cluster"
    ).get(pk=attempt_id)


def attempt_submit(*, attempt_id: int) -> None:
    """Submit a queued attempt; on a retry, adopt the Slurm job if the first try made one."""
    attempt = _attempt(attempt_id)
    if attempt.state == State.QUEUED:
        if attempt.cancel_requested_at:
            attempt_transition(
                attempt=attempt, to=State.CANCELLED, reason="Cancelled before submission."
            )
            return
        if not _code_ready(attempt):
            return
        if not attempt_transition(attempt=attempt, to=State.SUBMITTING, reason="Handing to Slurm."):
            return  # another worker claimed it
        is_retry = False
    elif attempt.state == State.SUBMITTING:
        is_retry = True  # a retried or redelivered task: the job may already exist
    else:
        return  # submitted already
    if attempt.account is None:
        attempt_transition(
            attempt=attempt, to=State.FAILED, reason="No cluster account to run the job as."
        )
        return
    endpoint = account_endpoint(account=attempt.account)
    try:
        with pool.session(endpoint) as connection:
            slurm = Slurm(connection, tools=attempt.job.cluster.slurm_tools)
            if is_retry and _adopt(attempt, connection, slurm):
                return
            submitted_at = timezone.now()
            slurm_job_id = _upload_and_submit(attempt, connection, slurm)
    except ClusterError as exc:
        if not exc.retryable:
            attempt_transition(attempt=attempt, to=State.FAILED, reason=str(exc))
            return
        logger.warning("submission of attempt %s failed, will retry: %s", attempt.pk, exc)
        raise SubmitRetry(str(exc)) from exc
    attempt_transition(
        attempt=attempt,
        to=State.PENDING,
        reason="Submitted to Slurm.",
        slurm_job_id=slurm_job_id,
        submitted_at=submitted_at,
    )
    _cancel_if_requested(attempt, slurm)


def _code_ready(attempt: Attempt) -> bool:
    """Fetch the job's git URL into a snapshot if it has one and no snapshot yet.

    Before the attempt is claimed: a redelivered task may fetch again (the job keeps the
    first snapshot), but never submits twice.
    """
    try:
        job_code_fetch(job=attempt.job)
    except JobError as exc:
        attempt_transition(attempt=attempt, to=State.FAILED, reason=exc.message)
        return False
    return True


def _upload_code(attempt: Attempt, connection: CodeShell, run_dir: RunDir) -> None:
    """The job's snapshot, uploaded and unpacked into the run directory's code directory."""
    snapshot = attempt.job.code
    if snapshot is None:
        return
    archive = run_dir.file(CODE_ARCHIVE_FILE)
    connection.upload(archive, snapshot_bytes(snapshot), mode=0o600)
    # A retried submission unpacks again into a fresh directory.
    connection.run(f"rm -rf -- {shlex.quote(run_dir.file(CODE_DIR))}")
    unpack_on_cluster(
        connection,
        archive=archive,
        dest=run_dir.file(CODE_DIR),
        max_bytes=settings.CODE_UNPACKED_MAX_BYTES,
        max_files=settings.CODE_MAX_FILES,
    )


def _upload_and_submit(attempt: Attempt, connection: Connection, slurm: Slurm) -> str:
    job = attempt.job
    if not attempt.run_dir:
        base = job.cluster.base_run_dir.rstrip("/")
        attempt.run_dir = connection.home_path(f"{base}/{attempt.uuid}")
        Attempt.objects.filter(pk=attempt.pk).update(run_dir=attempt.run_dir)
    run_dir = RunDir(attempt.run_dir)
    made = connection.run(f"mkdir -p -m 700 -- {shlex.quote(run_dir.path)}")
    if made.exit_status != 0:
        raise SlurmError(
            "mkdir", f"cannot create the run directory: {made.error_text.strip()}", retryable=False
        )
    for name, local_path in settings.RUN_DIR_FILES.items():
        connection.upload(run_dir.file(name), Path(local_path).read_bytes(), mode=0o600)
    _upload_code(attempt, connection, run_dir)
    preflight_fit(attempt=attempt, slurm=slurm)
    attempt_avoid_nodes(attempt=attempt, slurm=slurm)
    script = render_batch_script(job=job, attempt=attempt, run_dir=run_dir)
    connection.upload(run_dir.file(SCRIPT_FILE), script.encode(), mode=0o700)
    return slurm.submit(run_dir.file(SCRIPT_FILE))


def _adopt(attempt: Attempt, connection: Connection, slurm: Slurm) -> bool:
    """Take over the Slurm job an earlier try submitted, if there is one."""
    rows: list[SqueueRow] = slurm.find_by_name(attempt.slurm_job_name)
    if not rows:
        # Gone from squeue (and sacct, or no accounting): it may have run and ended.
        ran = _job_id_from_run_dir(attempt, connection)
        if ran is None:
            return False
        attempt_transition(
            attempt=attempt,
            to=State.PENDING,
            reason=f"Adopted Slurm job {ran}, submitted by an earlier try (it ran and left "
            "the queue; its run directory tells how it ended).",
            slurm_job_id=ran,
            submitted_at=timezone.now(),
        )
        return True
    if len(rows) > 1:
        logger.error(
            "attempt %s has %d Slurm jobs named %s", attempt.pk, len(rows), attempt.slurm_job_name
        )
    row = min(rows, key=lambda r: int(r.job_id.split("_")[0]))
    attempt_transition(
        attempt=attempt,
        to=State.PENDING,
        reason=f"Adopted Slurm job {row.job_id}, submitted by an earlier try.",
        slurm_job_id=row.job_id,
        submitted_at=timezone.now(),
    )
    new = portal_state(row.state)
    if new != State.PENDING:
        attempt_transition(attempt=attempt, to=new, reason=f"Slurm says {row.state}.")
    _cancel_if_requested(attempt, slurm)
    return True


def _job_id_from_run_dir(attempt: Attempt, connection: Connection) -> str | None:
    """The Slurm job id the attempt's job wrote when it started, if it did."""
    if not attempt.run_dir:
        return None  # the first try did not get as far as the upload
    path = RunDir(attempt.run_dir).file(SLURM_JOB_ID_FILE)
    result = connection.run(f"cat -- {shlex.quote(path)} 2>/dev/null")
    job_id = result.text.strip()
    return job_id if result.exit_status == 0 and job_id.isdigit() else None


def _cancel_if_requested(attempt: Attempt, slurm: Slurm) -> None:
    # None too when the attempt's row is gone (its job was deleted meanwhile).
    requested = (
        Attempt.objects.filter(pk=attempt.pk).values_list("cancel_requested_at", flat=True).first()
    )
    if requested and attempt.slurm_job_id:
        slurm.cancel(attempt.slurm_job_id)
