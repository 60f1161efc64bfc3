"""Each poll: every running rank's progress, and what to do when an attempt hangs.

Registered with the poller as a file watcher. It reads one small heartbeat
record per rank (at most MAX_RANKS, HEARTBEAT_READ bytes each) and, for a
flagged attempt, each rank's stack dump (capped); it also takes the steps of
rank-labelled lines from the stdout bytes the same reply brought, and the furthest
step the ingest read from the job's files (`monitoring.hangs.output`), so that a job
without the helper has progress too. On a hang it asks every rank for its stacks,
names the rank and node that stopped first, and, when the job's restart policy lists
"hang", cancels the attempt once the stacks are in (the diagnosis then says hang and
the restart excludes that node).
"""

import logging
import time
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.agent import AgentReply, FileRead, ListingRead
from jobs.enums import FailureClass, State
from jobs.models import Attempt
from jobs.restart import restart_decision
from jobs.rundir import STDOUT_FILE, RunDir, file_key, progress_file, stack_file
from jobs.scripts import TORCHRUN_TEMPLATES
from jobs.services import attempt_cancel_by_portal
from jobs.states import attempt_note
from monitoring.hangs.heartbeats import (
    HEARTBEAT_READ,
    log_rank_steps,
    parse_heartbeat,
    progress_from_json,
    progress_json,
)
from monitoring.hangs.output import OutputSteps, last_line, output_steps, steps_are_records
from monitoring.hangs.rules import (
    HANG,
    HangPolicy,
    RankProgress,
    Verdict,
    hang_verdict,
    is_ticking,
    pace_add,
)
from monitoring.hangs.stacks import MAX_STACK_RANKS, REQUEST_STACKS, STACK_READ_BYTES, stack_text
from monitoring.models import AttemptProgress
from portal_lib.bulk import bulk_update
from portal_lib.queueing import queue_on_commit

logger = logging.getLogger(__name__)

MAX_RANKS = 256  # heartbeat records read per attempt per poll
REFRESH = timedelta(seconds=5)


def attempt_ranks(attempt: Attempt) -> int:
    """How many ranks the attempt's spec starts (one per GPU under torchrun, else per node)."""
    job = attempt.job
    per_node = max(job.gpus_per_node, 1) if job.template in TORCHRUN_TEMPLATES else 1
    return min(job.nodes * per_node, MAX_RANKS)


def attempt_policy(attempt: Attempt) -> HangPolicy:
    job = attempt.job
    return HangPolicy.from_settings(
        settings.HANG_POLICY,
        multiple=job.hang_multiple,
        floor=job.hang_floor_seconds,
        startup=job.startup_window_seconds,
    )


def _watched(attempts: list[Attempt]) -> list[Attempt]:
    return [a for a in attempts if a.run_dir and a.state == State.RUNNING and a.started_at]


class ProgressWatcher:
    def __init__(self) -> None:
        self._rows: dict[int, AttemptProgress] = {}

    def requests(self, attempts: list[Attempt]) -> tuple[list[FileRead], list[ListingRead]]:
        watched = _watched(attempts)
        if not watched:
            self._rows = {}
            return [], []
        self._rows = {
            row.attempt_id: row
            for row in AttemptProgress.objects.filter(attempt_id__in=[a.pk for a in watched])
        }
        reads = []
        for attempt in watched:
            run_dir = RunDir(attempt.run_dir)
            ranks = range(attempt_ranks(attempt))
            reads += [
                FileRead(
                    key=file_key(attempt.uuid, progress_file(r)),
                    path=run_dir.file(progress_file(r)),
                    limit=HEARTBEAT_READ,
                )
                for r in ranks
            ]
            row = self._rows.get(attempt.pk)
            if row is not None and row.stacks_requested_at is not None:
                reads += [
                    FileRead(
                        key=file_key(attempt.uuid, stack_file(r)),
                        path=run_dir.file(stack_file(r)),
                        limit=STACK_READ_BYTES,
                    )
                    for r in ranks[:MAX_STACK_RANKS]
                    if str(r) not in row.stacks
                ]
        return reads, []

    def ingest(self, attempts: list[Attempt], reply: AgentReply) -> set[int]:
        ticks: list[AttemptProgress] = []
        watched = _watched(attempts)
        # Read after the ingest watcher stored this poll's points (monitoring.pipeline).
        output = output_steps(attempt_ids=[a.pk for a in watched]) if watched else {}
        for attempt in watched:
            try:
                with transaction.atomic():
                    tick = self._ingest_one(attempt, reply, output.get(attempt.pk, OutputSteps()))
            except Exception:  # one attempt's bytes or a bug must not cost the others
                logger.exception("progress of attempt %s failed", attempt.pk)
                continue
            if tick is not None:
                ticks.append(tick)
        # Steps and pace of rows whose verdict stands: one statement for the poll. A row
        # each, in its own transaction, was 12 % of a poll of 1,000 jobs (bench/soak.py).
        now = timezone.now()
        for row in ticks:
            row.updated_at = now
        try:
            bulk_update(AttemptProgress, ticks, _TICK_FIELDS)
        except Exception:  # the next poll writes them again: they are the latest readings
            logger.exception("progress of %d attempts not written", len(ticks))
        return set()

    def _ingest_one(
        self, attempt: Attempt, reply: AgentReply, output: OutputSteps
    ) -> AttemptProgress | None:
        """Read the attempt's progress and decide; returns its row when only its steps
        and pace are to be written (with the others'), having saved it itself otherwise."""
        row = self._rows.get(attempt.pk) or AttemptProgress(attempt=attempt)
        now = time.time()
        before = _saved_state(row)
        ranks = _merged(attempt, row, reply, now)
        row.ranks = {str(r.rank): progress_json(r, source) for r, source in ranks}
        progress = [r for r, _ in ranks]
        row.pace = pace_add(list(row.pace or []), progress, output_step=output.step, now=now)
        policy = attempt_policy(attempt)
        verdict = _judge(attempt, row, progress, output, policy, now)
        _stacks_in(attempt, row, reply)
        _decide(attempt, row, verdict, policy)
        # Heartbeats tick every second: a row whose steps, pauses and verdict are as they
        # were is written at most every REFRESH_SECONDS, not at every poll.
        fresh = row.updated_at and timezone.now() - row.updated_at < REFRESH
        after = _saved_state(row)
        if row._state.adding or after[1:] != before[1:]:
            row.save()  # new, or a verdict, culprit, stacks or cancel: with its notes
            return None
        return row if not fresh or after != before else None


# What a poll changes of a row whose verdict stands (`_decide`: its quiet and threshold).
_TICK_FIELDS = ("ranks", "pace", "quiet_seconds", "threshold_seconds", "updated_at")


def _saved_state(row: AttemptProgress) -> tuple[object, ...]:
    """What must reach the database at once when it changes (not the "alive" ticks)."""
    steps = sorted(
        (rank, item.get("step"), item.get("pause"), item.get("resumed_at"), item.get("node"))
        for rank, item in (row.ranks or {}).items()
    )
    furthest = row.pace[-1][1] if row.pace else None  # a step the output gave counts too
    return (
        (steps, furthest),
        row.verdict,
        row.culprit_rank,
        len(row.stacks or {}),
        row.hang_cancelled_at,
    )


def _judge(
    attempt: Attempt,
    row: AttemptProgress,
    ranks: list[RankProgress],
    output: OutputSteps,
    policy: HangPolicy,
    now: float,
) -> Verdict:
    if not output.read and not any(r.step is not None for r in ranks):
        return Verdict()  # its output is no longer read for steps and no rank reports
    started = attempt.started_at.timestamp() if attempt.started_at else now
    judged = partial(
        hang_verdict, ranks=ranks, now=now, started_at=started, pace=row.pace, policy=policy
    )
    verdict = judged()
    # A new hang of a job known by its output alone: its words say whether those were steps.
    if verdict.kind == HANG and not row.verdict and not ranks:
        return judged(records=steps_are_records(attempt_id=attempt.pk))
    return verdict


def _merged(
    attempt: Attempt, row: AttemptProgress, reply: AgentReply, now: float
) -> list[tuple[RankProgress, str]]:
    """Each rank's progress: this poll's heartbeat, else its log line's step, else as stored."""
    stored = {}
    for rank, item in (row.ranks or {}).items():
        try:
            stored[int(rank)] = (progress_from_json(rank, item), item.get("source", ""))
        except (TypeError, ValueError, AttributeError):
            continue
    for r in range(attempt_ranks(attempt)):
        chunk = reply.files.get(file_key(attempt.uuid, progress_file(r)))
        if chunk is None or chunk.error is not None:
            continue
        found = parse_heartbeat(chunk.data.strip(), rank=r, now=now)
        if found is not None:
            stored[r] = (found, "heartbeat")
    log = reply.files.get(file_key(attempt.uuid, STDOUT_FILE))
    if log is not None and log.error is None and log.data:
        for rank, step in log_rank_steps(log.data).items():
            if rank >= MAX_RANKS:
                continue
            before, source = stored.get(rank, (RankProgress(rank=rank), "log"))
            if source == "heartbeat" or (before.step is not None and before.step >= step):
                continue
            stored[rank] = (RankProgress(rank=rank, step=step, step_at=now), "log")
    return [stored[r] for r in sorted(stored)]


def _stacks_in(attempt: Attempt, row: AttemptProgress, reply: AgentReply) -> None:
    if row.stacks_requested_at is None:
        return
    stacks = dict(row.stacks or {})
    for r in range(min(attempt_ranks(attempt), MAX_STACK_RANKS)):
        chunk = reply.files.get(file_key(attempt.uuid, stack_file(r)))
        if chunk is None or chunk.error is not None or str(r) in stacks:
            continue
        text = stack_text(chunk.data)
        if text:
            stacks[str(r)] = text
    row.stacks = stacks


def _decide(attempt: Attempt, row: AttemptProgress, verdict: Verdict, policy: HangPolicy) -> None:
    now, now_s = timezone.now(), time.time()
    row.quiet_seconds, row.threshold_seconds = verdict.quiet, verdict.threshold
    if not verdict.kind:
        if row.verdict and row.hang_cancelled_at is None:
            attempt_note(
                attempt=attempt, reason=f"Progress again after the {row.verdict} flag: {row.why}"
            )
            row.verdict, row.flagged_at, row.why = "", None, ""
        return
    if not row.verdict:
        line = last_line(attempt_id=attempt.pk)
        why = f"{verdict.why} Its last line: {line}" if line else verdict.why
        row.verdict, row.flagged_at, row.why = verdict.kind, now, why
        row.last_step = verdict.last_step
        row.culprit_rank = verdict.culprit.rank if verdict.culprit else None
        row.culprit_node = verdict.culprit.node if verdict.culprit else ""
        row.stacks, row.stacks_requested_at = {}, now
        attempt_note(
            attempt=attempt,
            reason=f"{'Hung' if verdict.kind == HANG else 'Startup stall'}: {why}",
        )
        queue_on_commit(REQUEST_STACKS, attempt.pk)
        return
    if verdict.kind != HANG or row.hang_cancelled_at is not None:
        return
    expected = min(attempt_ranks(attempt), MAX_STACK_RANKS)
    waited = row.stacks_requested_at is None or now - row.stacks_requested_at >= timedelta(
        seconds=policy.stack_wait
    )
    # A stopped culprit never answers: then the others' stacks are enough, else the wait.
    # Only a heartbeat says it stopped: a rank known by its output alone may still answer.
    culprit = verdict.culprit
    stopped = bool(culprit and culprit.alive_at is not None and not is_ticking(culprit, now_s))
    answered = len(row.stacks or {}) >= expected - int(stopped)
    if not (waited or answered):
        return
    decision = restart_decision(job=attempt.job, attempt=attempt, failure_class=FailureClass.HANG)
    if not decision.restart:
        return
    reason = "Cancelled for its hang: the restart policy resumes it from its checkpoint."
    # A cancel asked for already (the user's, an idle policy's) stands: no second one.
    if attempt_cancel_by_portal(attempt=attempt, reason=reason):
        row.hang_cancelled_at = now
