"""Which Slurm job is an attempt's: by what its tenant cannot change, never by its name.

From inside a job its owner can rename it, change its comment, lower its time limit,
hold it while pending and (after `scontrol update Requeue=1`) requeue it. The user it
runs as and its id are Slurm's. So is its submit time, except that a requeue resets it
(sacct keeps each run as a record of its own, shown with --duplicates).
"""

from datetime import datetime, timedelta

from jobs.models import Attempt

# The portal's clock against the controller's: a submit time this much before the
# attempt was made still counts as after it.
CLOCK_SKEW = timedelta(minutes=5)


def is_attempts_job(attempt: Attempt, *, user: str, submitted: datetime | None) -> bool:
    """Whether a job Slurm shows under the attempt's id is the attempt's own.

    It runs as the attempt's cluster account and was submitted after the attempt was
    made (a requeue only moves that later); an id reused by a cluster started afresh,
    or one that came back from a tampered sbatch, fails one or the other.
    """
    if attempt.account is None or submitted is None:
        return False
    return user == attempt.account.username and submitted >= attempt.created_at - CLOCK_SKEW


def tampering(
    attempt: Attempt, *, name: str, submitted: datetime | None, waiting: bool = False
) -> str:
    """What the attempt's own job changed of what the portal set, in words; blank: nothing.

    The portal submits with --no-requeue, so a job it saw start that waits again
    (`waiting`), or was submitted after that start (a requeue resets the submit time),
    was requeued.
    """
    changes = []
    if name != attempt.slurm_job_name:
        changes.append(f"is named {name[:80]!r}, not as the portal named it")
    started = attempt.started_at
    if started is not None and (waiting or (submitted is not None and submitted > started)):
        changes.append("was requeued after it started (submitted with --no-requeue)")
    return " and ".join(changes)
