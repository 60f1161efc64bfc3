"""What the job page and the API show of hangs: each flagged attempt's culprit, every rank's
progress, and the ranks' stacks side by side; a running attempt's verdict for the page's top."""

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jobs.enums import State
from jobs.models import Attempt
from jobs.queue.waits import format_wait
from monitoring.hangs.heartbeats import progress_from_json
from monitoring.hangs.rules import STARTUP, is_ticking
from monitoring.hangs.stacks import MAX_STACK_RANKS
from monitoring.models import AttemptProgress


@dataclass(frozen=True)
class Stall:
    """A running attempt flagged as hung or stalled at startup, as the top of its page says it."""

    attempt: int  # its number
    verdict: str
    quiet: timedelta  # without progress, as of the page's time
    why: str

    @property
    def text(self) -> str:
        """ "no step for 3 min", "no first step after 31 min"."""
        seconds = self.quiet.total_seconds()
        took = f"{max(seconds, 0):.0f} s" if seconds < 90 else format_wait(self.quiet)
        return f"no first step after {took}" if self.verdict == STARTUP else f"no step for {took}"


def attempt_stall(*, attempt: Attempt, now: datetime) -> Stall | None:
    """The running attempt's hang or startup stall, if flagged (one query)."""
    if attempt.state != State.RUNNING:
        return None
    row = (
        AttemptProgress.objects.filter(attempt_id=attempt.pk)
        .exclude(verdict="")
        .values("verdict", "why", "quiet_seconds", "updated_at")
        .first()
    )
    if row is None:
        return None
    # Quiet as of the poll's last write, and since: a poll that stopped does not stop the clock.
    quiet = timedelta(seconds=row["quiet_seconds"] or 0.0) + (now - row["updated_at"])
    return Stall(attempt.number, row["verdict"], quiet, row["why"])


def _ranks(progress: AttemptProgress, now: float) -> list[dict[str, Any]]:
    # The row keeps "alive" ticks only every few seconds: ticking as of its last write.
    saved = progress.updated_at.timestamp() if progress.updated_at else now
    rows = []
    for rank, item in sorted((progress.ranks or {}).items(), key=lambda kv: int(kv[0])):
        r = progress_from_json(rank, item)
        rows.append(
            {
                "rank": r.rank,
                "node": r.node,
                "step": r.step,
                "seconds_since_step": round(now - r.step_at, 1) if r.step_at else None,
                "pause": r.pause,
                "ticking": is_ticking(r, saved),
                "source": item.get("source", ""),
                "culprit": r.rank == progress.culprit_rank,
            }
        )
    return rows


def job_hangs(*, attempts: list[Attempt]) -> list[dict[str, Any]]:
    """One entry per attempt flagged as hung or stalled at startup (one query)."""
    numbers = {a.pk: a.number for a in attempts}
    now = time.time()
    found = []
    for progress in AttemptProgress.objects.filter(attempt_id__in=numbers).exclude(verdict=""):
        ranks = _ranks(progress, now)
        stacks = progress.stacks or {}
        # Each rank's place, dump or not; and a dump of a job no rank reports for (a plain script).
        shown = {r["rank"]: r["node"] for r in ranks[:MAX_STACK_RANKS]}
        for rank in stacks:
            shown.setdefault(int(rank), "")
        found.append(
            {
                "attempt": numbers[progress.attempt_id],
                "verdict": progress.verdict,
                "why": progress.why,
                "flagged_at": progress.flagged_at,
                "culprit_rank": progress.culprit_rank,
                "culprit_node": progress.culprit_node,
                "last_step": progress.last_step,
                "cancelled": progress.hang_cancelled_at is not None,
                "ranks": ranks,
                "stacks": [
                    {"rank": rank, "node": node, "text": stacks.get(str(rank), "")}
                    for rank, node in sorted(shown.items())[:MAX_STACK_RANKS]
                ],
            }
        )
    return sorted(found, key=lambda h: h["attempt"])
