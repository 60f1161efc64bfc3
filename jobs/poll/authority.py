"""Job state as the portal's own account on a cluster sees it: the truth the poll applies.

A job runs as its user, so whatever comes back through that user's session (squeue
there, the exit-code file the batch script writes) is the job's word and only a hint:
it can hide the job or report it gone. The portal account's squeue and sacct decide
state, and a job is final only once one of them shows it so; a job that left squeue
without a record in sacct yet stays live (UNKNOWN) and keeps its reservation.

The job id itself came back from sbatch through the user's session, so it is checked
too: the job Slurm shows under it must carry the attempt's name. When it does not, the
portal account looks the name up; the one job of that name is followed instead, and
with none or several the attempt fails rather than track (and charge) another job.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster
from clusters.selectors import portal_endpoint
from clusters.slurm import AccountingDisabled, SacctRow, Slurm, SqueueRow
from clusters.ssh import SSHError, pool
from jobs.enums import FINAL_STATES, State
from jobs.models import MAX_SLURM_REASON, Attempt
from jobs.slurm_states import portal_state
from jobs.states import attempt_note, attempt_transition

# A job gone from squeue without an exit file may be mid-requeue; wait this long.
VANISH_GRACE = timedelta(seconds=30)
# sacct's window starts this long before the earliest submission (clock skew).
SACCT_MARGIN = timedelta(minutes=5)


@dataclass(frozen=True)
class ClusterTruth:
    """What the portal account read of the polled jobs, by Slurm job id."""

    queue: dict[str, SqueueRow] = field(default_factory=dict)
    history: dict[str, SacctRow] = field(default_factory=dict)  # only jobs gone from squeue
    accounting: bool = False  # sacct answered for the jobs gone from squeue
    # For attempts whose id shows a job of another name: the jobs named as the attempt.
    named: dict[str, list[SqueueRow]] = field(default_factory=dict)


def _misnamed(
    attempts: list[Attempt], rows: dict[str, SqueueRow] | dict[str, SacctRow]
) -> list[str]:
    return [
        a.slurm_job_name
        for a in attempts
        if a.slurm_job_id in rows and rows[a.slurm_job_id].name != a.slurm_job_name
    ]


def truth_read(*, cluster: Cluster, attempts: list[Attempt]) -> ClusterTruth:
    """squeue for the attempts' jobs as the portal account, and sacct for those it lacks.

    Raises SSHError or SlurmError when the cluster cannot say (state stays unknown).
    """
    endpoint = portal_endpoint(cluster=cluster)
    if endpoint is None:
        raise SSHError(f"cluster {cluster.name!r} has no portal account", retryable=False)
    ids = sorted({a.slurm_job_id for a in attempts if a.slurm_job_id})
    if not ids:
        return ClusterTruth()
    with pool.session(endpoint) as connection:
        slurm = Slurm(connection, tools=cluster.slurm_tools)
        queue = {row.job_id: row for row in slurm.queue(ids)}
        named: dict[str, list[SqueueRow]] = {}
        for row in slurm.named(_misnamed(attempts, queue)):
            named.setdefault(row.name, []).append(row)
        missing = [job_id for job_id in ids if job_id not in queue]
        if not (missing and cluster.accounting_enabled):
            return ClusterTruth(queue=queue, named=named)
        since = min(a.submitted_at or a.created_at for a in attempts) - SACCT_MARGIN
        try:
            rows = slurm.history(missing, since=since)
        except AccountingDisabled:
            return ClusterTruth(queue=queue, named=named)
    # sacct lists a requeued job once per run, oldest first: the last one is current.
    history = {row.job_id: row for row in rows}
    return ClusterTruth(queue=queue, history=history, accounting=True, named=named)


def needs_exit_hint(attempts: list[Attempt], truth: ClusterTruth) -> list[Attempt]:
    """The attempts for which truth_apply would read the exit-code file (see there)."""
    if truth.accounting:
        return []
    now = timezone.now()
    return [
        a
        for a in attempts
        if a.slurm_job_id not in truth.queue
        and a.slurm_job_id not in truth.history
        and now - a.state_changed_at > VANISH_GRACE
    ]


def truth_apply(
    attempts: list[Attempt], truth: ClusterTruth, exit_hints: dict[int, int | None]
) -> int:
    """Move each attempt to the state the portal account saw; returns how many changed.

    `exit_hints` (attempt pk -> the exit-code file's value) is used only where the
    cluster keeps no accounting and the job has long left the portal account's squeue.
    """
    now = timezone.now()
    changed = 0
    for attempt in attempts:
        row = truth.queue.get(attempt.slurm_job_id)
        record = truth.history.get(attempt.slurm_job_id)
        shown = row or record
        if shown is not None and shown.name != attempt.slurm_job_name:
            changed += _not_its_job(attempt, shown.name, truth.named.get(attempt.slurm_job_name))
        elif row is not None:
            changed += from_squeue(attempt, row, None, now)
        elif record is not None:
            changed += _from_sacct(attempt, record, now)
        elif now - attempt.state_changed_at <= VANISH_GRACE:
            continue
        elif truth.accounting:
            changed += _unknown(
                attempt,
                "The job left Slurm's queue and sacct has no record of it yet; its GPUs stay "
                "reserved until it has.",
            )
        else:
            changed += _vanished(attempt, exit_hints.get(attempt.pk), now)
    return changed


def _not_its_job(attempt: Attempt, shown_name: str, named: list[SqueueRow] | None) -> int:
    """The id from sbatch shows another job: follow the one job of the attempt's name."""
    given = attempt.slurm_job_id
    wrong = f"Slurm job {given} is named {shown_name!r}, not {attempt.slurm_job_name!r}"
    if named is not None and len(named) == 1:
        found = named[0].job_id
        with transaction.atomic():  # the new id and the event saying why, seen together
            if not Attempt.objects.filter(pk=attempt.pk, slurm_job_id=given).update(
                slurm_job_id=found
            ):
                return 0
            attempt.slurm_job_id = found
            attempt_note(
                attempt=attempt,
                reason=f"{wrong}: the id that came back from sbatch was another job's; "
                f"following job {found}, the one Slurm shows by this attempt's name.",
            )
        return 1
    count = len(named or [])
    return int(
        attempt_transition(
            attempt=attempt,
            to=State.FAILED,
            reason=f"{wrong}, and Slurm shows {count or 'no'} job{'s' if count != 1 else ''} "
            "of this attempt's name: the id that came back from sbatch was another job's, "
            "so the portal stops tracking it (charged by the portal's own times).",
            ended_at=timezone.now(),
        )
    )


def _unknown(attempt: Attempt, reason: str) -> int:
    if attempt.state == State.UNKNOWN:
        return 0
    return int(attempt_transition(attempt=attempt, to=State.UNKNOWN, reason=reason))


def _from_sacct(attempt: Attempt, record: SacctRow, now: datetime) -> int:
    new = portal_state(record.state)
    if new not in FINAL_STATES:
        return 0  # running by sacct but not in squeue: a moment of lag, look again
    fields: dict[str, Any] = {"ended_at": record.end_time or now}
    if record.start_time and record.node_list:
        fields["started_at"] = record.start_time
        if record.node_list != attempt.node_list:
            fields["node_list"] = record.node_list
    if record.exit_code is not None:
        fields["exit_code"] = record.exit_code
    reason = f"Slurm accounting says {record.state}."
    return int(attempt_transition(attempt=attempt, to=new, reason=reason, **fields))


def _vanished(attempt: Attempt, exit_code: int | None, now: datetime) -> int:
    # No accounting: the portal account's squeue keeps an ended job for MinJobAge, so a
    # job long gone from it has ended; only its exit-code file can say how.
    if exit_code is not None:
        return int(
            attempt_transition(
                attempt=attempt,
                to=State.COMPLETED if exit_code == 0 else State.FAILED,
                reason=f"Exited with status {exit_code}.",
                exit_code=exit_code,
                ended_at=attempt.ended_at or now,
            )
        )
    return int(
        attempt_transition(
            attempt=attempt,
            to=State.FAILED,
            reason="The job left Slurm's queue without recording an exit status "
            "(killed before the batch script ended, and the cluster keeps no accounting).",
            ended_at=now,
        )
    )


def from_squeue(attempt: Attempt, row: SqueueRow, exit_code: int | None, now: datetime) -> int:
    """Apply one squeue row (the exit code, if given, wins over squeue's)."""
    new = portal_state(row.state)
    fields: dict[str, Any] = {}
    if row.node_list and row.node_list != attempt.node_list and not row.node_list.startswith("("):
        fields["node_list"] = row.node_list
    if row.start_time and new != State.PENDING and attempt.started_at != row.start_time:
        fields["started_at"] = row.start_time
    if new in FINAL_STATES:
        fields["ended_at"] = row.end_time or now
        code = exit_code if exit_code is not None else row.exit_code
        if code is not None:
            fields["exit_code"] = code
    reason = row.reason if row.reason and row.reason not in ("None", "(null)") else ""
    waiting = reason[:MAX_SLURM_REASON] if new == State.PENDING else ""
    if waiting != attempt.slurm_reason:
        fields["slurm_reason"] = waiting
    if new == attempt.state and not fields:
        return 0
    return int(
        attempt_transition(
            attempt=attempt, to=new, reason=reason or f"Slurm says {row.state}.", **fields
        )
    )
