"""Slurm's own estimate of when each pending job starts, stored on the attempt.

squeue prints a pending job's StartTime as the scheduler's expected start (the field
`squeue --start` shows; N/A until the backfill scheduler has placed the job). The
portal account's squeue already brings it with every poll, but the estimate moves with
each scheduling pass: it is stored at most every QUEUE_ESTIMATE_INTERVAL per cluster,
so the 1 s poll pays one cache check and no extra Slurm command or write. The first
estimate of each attempt is kept beside the moving one, with when it was read: the history
that corrects later estimates (jobs.queue.forecast) compares it with the actual start.
"""

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from clusters.slurm import SqueueRow
from jobs.enums import State
from jobs.identity import is_attempts_job
from jobs.models import Attempt
from jobs.slurm_states import portal_state

ESTIMATE_KEY = "jobs:start-estimates:{cluster_id}"


def estimates_due(*, cluster_id: int) -> bool:
    """True at most once per QUEUE_ESTIMATE_INTERVAL for a cluster (shared by all workers)."""
    key = ESTIMATE_KEY.format(cluster_id=cluster_id)
    return bool(cache.add(key, 1, timeout=settings.QUEUE_ESTIMATE_INTERVAL))


def record_estimates(attempts: list[Attempt], queue: dict[str, SqueueRow]) -> int:
    """Store the portal account's squeue StartTime of each pending attempt; returns how many moved.

    A row under the attempt's id that is another job's (another user's, or submitted
    before the attempt was made: `jobs.identity`) says nothing of this attempt. A job
    its tenant renamed is still the attempt's, and waits as Slurm says.
    """
    moved = []
    now = timezone.now()
    for attempt in attempts:
        row = queue.get(attempt.slurm_job_id) if attempt.slurm_job_id else None
        if row is None or not is_attempts_job(attempt, user=row.user, submitted=row.submit_time):
            continue
        if portal_state(row.state) != State.PENDING:
            continue
        first = row.start_time is not None and attempt.first_estimate_read_at is None
        if first:
            attempt.first_estimate_at, attempt.first_estimate_read_at = row.start_time, now
        if row.start_time != attempt.expected_start_at or first:
            attempt.expected_start_at = row.start_time
            moved.append(attempt)
    Attempt.objects.bulk_update(
        moved, ["expected_start_at", "first_estimate_at", "first_estimate_read_at"]
    )
    return len(moved)
