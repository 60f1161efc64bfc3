"""Job state as the portal's own account on a cluster sees it: the truth the poll applies.

A job runs as its user, so whatever comes back through that user's session (squeue
there, the exit-code file the batch script writes) is the job's word and only a hint:
it can hide the job or report it gone. The portal account's squeue and sacct decide
state, and a job is final only once one of them shows it so; a job that left squeue
without a record in sacct yet stays live (UNKNOWN) and keeps its reservation.

Which job is the attempt's is decided by what its tenant cannot change: the id, the
user it runs as and its submit time (`jobs.identity`), never its name. The id
came back from sbatch through the user's session, so a job under it run by another
user, or submitted before the attempt was made, is another job's; the portal then
looks for the attempt's own by its name among its user's jobs. A job that is the
attempt's but changed what the portal set (renamed or requeued itself), or left
squeue while sacct says it still runs, is cancelled through the portal account, and
stays live, counted and charged until Slurm says it ended.
"""

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster
from clusters.selectors import portal_endpoint
from clusters.slurm import AccountingDisabled, SacctRow, Slurm, SlurmError, SqueueRow
from clusters.ssh import SSHError, pool
from jobs.enums import FINAL_STATES, State
from jobs.identity import is_attempts_job, tampering
from jobs.models import MAX_SLURM_REASON, Attempt
from jobs.slurm_states import portal_state
from jobs.states import attempt_note, attempt_transition

logger = logging.getLogger(__name__)

# A job gone from squeue without an exit file may be mid-requeue; wait this long.
VANISH_GRACE = timedelta(seconds=30)
# sacct's window starts this long before the earliest submission (clock skew).
SACCT_MARGIN = timedelta(minutes=5)
# scancels one poll sends at most (one command each); the rest go with the next poll.
MAX_CANCELS = 20


@dataclass(frozen=True)
class Verdict:
    """Which job a poll takes for an attempt's, and which jobs it cancels (id -> why)."""

    job_id: str | None  # None: no job Slurm shows is the attempt's
    cancel: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterTruth:
    """What the portal account read of the polled jobs, by Slurm job id."""

    queue: dict[str, SqueueRow] = field(default_factory=dict)
    history: dict[str, SacctRow] = field(default_factory=dict)  # only jobs gone from squeue
    accounting: bool = False  # sacct answered for the jobs gone from squeue
    # By the attempt's recorded id, where the poll takes another job or cancels one.
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # job id -> why scancel is not done


def _is_its(attempt: Attempt, shown: SqueueRow | SacctRow) -> bool:
    return is_attempts_job(attempt, user=shown.user, submitted=shown.submit_time)


def _live(row: SqueueRow | SacctRow) -> bool:
    return portal_state(row.state) not in FINAL_STATES


def _in_doubt(attempt: Attempt, row: SqueueRow) -> bool:
    """Whether the job under the attempt's id is another's or was renamed."""
    return not _is_its(attempt, row) or row.name != attempt.slurm_job_name


def verdict(attempt: Attempt, row: SqueueRow, named: list[SqueueRow]) -> Verdict | None:
    """Which job is the attempt's when its id shows `row`; None: that one, untouched.

    `named`: squeue's jobs of the attempt's name. The id came back from sbatch through
    the user's session, and a name is the tenant's to give, so neither wins alone. The
    attempt's jobs are those run as its user and submitted since it was made (the id's
    and any of its name); the oldest that bears its name is followed, else the id's. A
    live one that changed what the portal set, or another claiming its name, is
    cancelled, so that no job of the attempt runs on uncounted and unbilled.
    """
    given = attempt.slurm_job_id
    own = _is_its(attempt, row)
    cancel: dict[str, str] = {}
    if own and _live(row):
        waiting = portal_state(row.state) == State.PENDING
        changed = tampering(attempt, name=row.name, submitted=row.submit_time, waiting=waiting)
        if changed:
            cancel[given] = changed
    if not _in_doubt(attempt, row):
        return Verdict(job_id=given, cancel=cancel) if cancel else None
    claims = sorted(
        (
            r
            for r in named
            if r.job_id != given
            and r.name == attempt.slurm_job_name
            and _is_its(attempt, r)
            and _live(r)
        ),
        key=lambda r: (r.submit_time, r.job_id),
    )
    if not claims:
        return Verdict(job_id=given if own else None, cancel=cancel)
    kept = claims[0].job_id
    for other in claims[1:]:
        cancel[other.job_id] = f"bears this attempt's name beside job {kept}"
    return Verdict(job_id=kept, cancel=cancel)


def _gone_yet_running(attempt: Attempt, record: SacctRow) -> Verdict | None:
    if not (_is_its(attempt, record) and _live(record)):
        return None
    if timezone.now() - attempt.state_changed_at <= VANISH_GRACE:
        return None
    why = "left Slurm's queue while sacct says it still runs"
    return Verdict(job_id=attempt.slurm_job_id, cancel={attempt.slurm_job_id: why})


def truth_read(*, cluster: Cluster, attempts: list[Attempt]) -> ClusterTruth:
    """squeue for the attempts' jobs as the portal account, and sacct for those it lacks;
    the jobs `verdict` condemns are cancelled in the same session.

    Raises SSHError or SlurmError when the cluster cannot say (state stays unknown).
    """
    endpoint = portal_endpoint(cluster=cluster)
    if endpoint is None:
        raise SSHError(f"cluster {cluster.name!r} has no portal account", retryable=False)
    ids = sorted({a.slurm_job_id for a in attempts if a.slurm_job_id})
    if not ids:
        return ClusterTruth()
    history: dict[str, SacctRow] = {}
    accounting = False
    verdicts: dict[str, Verdict] = {}
    with pool.session(endpoint) as connection:
        slurm = Slurm(connection, tools=cluster.slurm_tools)
        queue = {row.job_id: row for row in slurm.queue(ids)}
        doubted = [a for a in attempts if a.slurm_job_id in queue]
        doubted = [a for a in doubted if _in_doubt(a, queue[a.slurm_job_id])]
        named: dict[str, list[SqueueRow]] = {}
        for shown in slurm.named([a.slurm_job_name for a in doubted]):
            named.setdefault(shown.name, []).append(shown)
        for attempt in attempts:
            row = queue.get(attempt.slurm_job_id)
            if row is not None:
                found = verdict(attempt, row, named.get(attempt.slurm_job_name, []))
                if found is not None:
                    verdicts[attempt.slurm_job_id] = found
        missing = [job_id for job_id in ids if job_id not in queue]
        if missing and cluster.accounting_enabled:
            since = min(a.submitted_at or a.created_at for a in attempts) - SACCT_MARGIN
            try:
                # Without --duplicates sacct gives a requeued job's latest run: its state.
                history = {row.job_id: row for row in slurm.history(missing, since=since)}
                accounting = True
            except AccountingDisabled:
                pass
        for attempt in attempts:
            record = history.get(attempt.slurm_job_id)
            if record is not None and (gone := _gone_yet_running(attempt, record)):
                verdicts[attempt.slurm_job_id] = gone
        condemned = sorted({job_id for v in verdicts.values() for job_id in v.cancel})
        refused = {job_id: "left for the next poll" for job_id in condemned[MAX_CANCELS:]}
        for job_id in condemned[:MAX_CANCELS]:
            if error := _cancel(slurm, job_id):
                refused[job_id] = error
    return ClusterTruth(
        queue=queue, history=history, accounting=accounting, verdicts=verdicts, refused=refused
    )


def _cancel(slurm: Slurm, job_id: str) -> str:
    """scancel as the portal account; Slurm's refusal in words, blank when it took."""
    try:
        slurm.cancel(job_id)
    except SlurmError as exc:
        logger.warning("the portal account could not cancel Slurm job %s: %s", job_id, exc)
        return str(exc)
    return ""


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
        decided = truth.verdicts.get(attempt.slurm_job_id)
        if decided is not None and decided.cancel:
            _cancelled_by_portal(attempt, decided, truth.refused)
        # (A verdict is made only of a job Slurm showed.)
        if decided is not None and decided.job_id != attempt.slurm_job_id and shown is not None:
            changed += _not_its_job(attempt, shown, decided.job_id)
            continue
        if record is not None and row is None and not _is_its(attempt, record):
            changed += _not_its_job(attempt, record, None)
            continue
        if row is not None:
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


def _cancelled_by_portal(attempt: Attempt, decided: Verdict, refused: dict[str, str]) -> None:
    """Say on the timeline which jobs the portal cancelled, and why; once where it is the
    attempt's own job (the attempt then ends as it does, its cancel asked for)."""
    with transaction.atomic():
        now = timezone.now()
        if decided.job_id in decided.cancel:
            if not Attempt.objects.filter(pk=attempt.pk, cancel_requested_at__isnull=True).update(
                cancel_requested_at=now
            ):
                return
            attempt.cancel_requested_at = now
        said = []
        for job_id, why in decided.cancel.items():
            outcome = (
                f"the portal account's scancel is not done ({refused[job_id][:200]}) and is "
                "sent again each poll until it is"
                if job_id in refused
                else "the portal cancelled it through its own account"
            )
            said.append(f"Slurm job {job_id} {why}: {outcome}")
        attempt_note(
            attempt=attempt,
            reason="; ".join(said) + ". The attempt is charged until Slurm says it ended.",
            at=now,
        )


def _described(shown: SqueueRow | SacctRow) -> str:
    when = f"{shown.submit_time:%Y-%m-%d %H:%M:%S}" if shown.submit_time else "an unknown time"
    return f"{shown.user or 'an unknown user'}'s job submitted at {when}"


def _not_its_job(attempt: Attempt, shown: SqueueRow | SacctRow, found: str | None) -> int:
    """The id from sbatch shows another job: follow `found`, else fail the attempt."""
    given = attempt.slurm_job_id
    wrong = f"Slurm job {given} is {_described(shown)}, named {shown.name[:80]!r}"
    if found is not None:
        with transaction.atomic():  # the new id and the event saying why, seen together
            if not Attempt.objects.filter(pk=attempt.pk, slurm_job_id=given).update(
                slurm_job_id=found
            ):
                return 0
            attempt.slurm_job_id = found
            attempt_note(
                attempt=attempt,
                reason=f"{wrong}: the id that came back from sbatch was not this attempt's "
                f"job; following job {found}, its user's job of this attempt's name.",
            )
        return 1
    return int(
        attempt_transition(
            attempt=attempt,
            to=State.FAILED,
            reason=f"{wrong}, not this attempt's, and Slurm shows no job of this attempt's "
            "name and user: the id that came back from sbatch was another job's, so the "
            "portal stops tracking it (charged by the portal's own times).",
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
