"""What the job page and the API show of hangs: each flagged attempt's culprit, every rank's
progress, and the ranks' stacks side by side."""

import time
from typing import Any

from jobs.models import Attempt
from monitoring.hangs.heartbeats import progress_from_json
from monitoring.hangs.rules import is_ticking
from monitoring.hangs.stacks import MAX_STACK_RANKS
from monitoring.models import AttemptProgress


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
                    {"rank": r["rank"], "node": r["node"], "text": stacks.get(str(r["rank"]), "")}
                    for r in ranks[:MAX_STACK_RANKS]
                ],
            }
        )
    return sorted(found, key=lambda h: h["attempt"])
