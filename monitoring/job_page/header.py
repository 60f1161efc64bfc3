"""The facts a researcher looks for at the top of a job page: where and how long it ran.

(The title says "attempt n of at most m" while a restart may follow, and "not restarted"
once the restart policy, jobs.restart, has said no to the latest failure.)

One HeaderFacts per page load, from the job and its attempts (a pending job adds one
query: how long similar jobs waited; a started one two: its hang verdict, and whether its
steps are steps); the page replaces the block when a state changes and ticks the elapsed
time itself.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from jobs.enums import FINAL_STATES, NEVER_RESTART, FailureClass, State
from jobs.models import Attempt, Job
from jobs.queue.accuracy import StartHistory, start_history
from jobs.queue.line import jobs_waiting
from jobs.queue.reasons import explain_reason
from jobs.queue.waits import format_wait, similar_waits
from jobs.restart import restart_decision
from monitoring.hangs.output import steps_are_records
from monitoring.hangs.selectors import Stall, attempt_stall
from monitoring.job_page.facts import FAILED_STATES

# Failures that a bigger run would meet again: no plan is offered from them.
_FAILS_AGAIN = NEVER_RESTART - {FailureClass.CANCELLED}


@dataclass(frozen=True)
class HeaderFacts:
    slurm_ids: list[tuple[int, str]]  # (attempt number, Slurm job id), first to last
    nodes: str
    state: str
    state_label: str
    pending_reason: str
    expected_start: str  # pending only: Slurm's estimate, or that it has none yet
    similar_waits: str  # pending only: how long similar jobs waited (portal's records)
    submitted_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None
    elapsed: timedelta | None
    run_dir: str
    stall: Stall | None = None  # the running attempt's hang or startup stall
    # Its points' x numbers records (no step printed): the page says "record n", never "step n".
    steps_are_records: bool = False
    # Waiting in its project's line: its place and why, in words (jobs.queue.line).
    waiting: str = ""
    attempt_of: str = ""  # "attempt 2 of at most 3", "attempt 1, not restarted"
    restart_note: str = ""  # why the latest failure is not restarted (jobs.restart)
    fails_again: bool = False  # its latest failure would end a bigger run the same way

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def pending_words(self) -> str:
        """Slurm's reason in plain words, with what the owner can do about it."""
        return explain_reason(self.pending_reason).text if self.pending_reason else ""

    @property
    def elapsed_text(self) -> str:
        return format_elapsed(self.elapsed)


def header_facts(*, job: Job, attempts: list[Attempt], now: datetime) -> HeaderFacts:
    latest = attempts[-1] if attempts else None
    first = attempts[0] if attempts else None
    started = latest.started_at if latest else None
    ended = latest.ended_at if latest else None
    state = latest.state if latest else job.state
    pending = latest is not None and state == State.PENDING
    expected, waits = _queue_texts(job, latest, now) if pending and latest else ("", "")
    stall = attempt_stall(attempt=latest, now=now) if latest and started else None
    label = State(state).label if state in State.values else state
    attempt_of, restart_note, fails_again = attempt_wording(job=job, latest=latest)
    return HeaderFacts(
        slurm_ids=[(a.number, a.slurm_job_id) for a in attempts if a.slurm_job_id],
        nodes=latest.node_list if latest else "",
        state=state,
        state_label=f"{label}, {stall.text}" if stall else str(label),
        pending_reason=latest.slurm_reason if latest and pending else "",
        expected_start=expected,
        similar_waits=waits,
        submitted_at=(first.submitted_at if first else None) or job.created_at,
        started_at=started,
        ended_at=ended,
        elapsed=((ended or now) - started) if started else None,
        run_dir=latest.run_dir if latest else "",
        stall=stall,
        steps_are_records=bool(latest and started and steps_are_records(attempt_id=latest.pk)),
        waiting=_waiting_text(job) if state == State.WAITING else "",
        attempt_of=attempt_of,
        restart_note=restart_note,
        fails_again=fails_again,
    )


def attempt_wording(*, job: Job, latest: Attempt | None) -> tuple[str, str, bool]:
    """The title's attempt count, why no restart follows, and whether a bigger run would
    fail the same way: true for the latest failure, by the restart policy's own decision
    (restart_decision)."""
    number = latest.number if latest else 1
    failure = latest.failure_class if latest and latest.state in FAILED_STATES else ""
    fails_again = failure in _FAILS_AGAIN
    if latest is not None and failure and job.max_restarts:
        decision = restart_decision(job=job, attempt=latest, failure_class=failure)
        if not decision.restart:
            return f"attempt {number}, not restarted", decision.why, fails_again
    # Preflight resubmissions (jobs.preflight) are attempts too, but no restarts.
    extra = latest.preflight_resubmits if latest else 0
    most = f"at most {job.max_restarts + 1 + extra}" if job.max_restarts or extra else "1"
    return f"attempt {number} of {most}", "", fails_again


def _waiting_text(job: Job) -> str:
    found = jobs_waiting([job]).get(job.pk)
    return f"{found.place.words} {found.reason}" if found else ""


def _queue_texts(job: Job, latest: Attempt, now: datetime) -> tuple[str, str]:
    history = similar_waits(
        cluster_id=job.cluster_id,
        partition=job.partition,
        nodes=job.nodes,
        gpus_per_node=job.gpus_per_node,
        now=now,
    )
    starts = start_history(cluster_id=job.cluster_id, partition=job.partition, now=now)
    return expected_start_text(latest.expected_start_at, now, starts), history.text


def expected_start_text(
    expected: datetime | None, now: datetime, history: StartHistory | None = None
) -> str:
    """Slurm's estimate in words, corrected by the history of its estimates here when that
    says enough (jobs.queue.accuracy); Slurm gives none (N/A) until it has placed the job."""
    if expected is None:
        return "no estimate yet"
    if expected <= now:
        return f"Slurm expected it to start by {expected:%H:%M} UTC; no newer estimate yet"
    slurm = expected - now
    if history is None:
        return f"expected to start in about {format_wait(slurm)} (Slurm's estimate)"
    if history.factor is None:
        return f"expected to start in about {format_wait(slurm)} ({history.text})"
    corrected = timedelta(seconds=history.correct(slurm.total_seconds()))
    return (
        f"expected to start in about {format_wait(corrected)} "
        f"(Slurm says {format_wait(slurm)}; {history.text})"
    )


def format_elapsed(elapsed: timedelta | None) -> str:
    """As Slurm's squeue prints elapsed time: [days-]hours:minutes:seconds."""
    if elapsed is None:
        return "-"
    seconds = max(int(elapsed.total_seconds()), 0)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}" if days else text
