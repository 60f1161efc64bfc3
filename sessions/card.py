"""What a session's job page shows beside its GPU charts: the Open button and the time left."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from jobs.enums import State, Template
from jobs.interactive import lab_base_url
from jobs.models import Attempt, Job
from portal_lib.viewers import Viewer, signed_in
from sessions.access import may_open


@dataclass(frozen=True)
class SessionCard:
    running: bool
    may_open: bool
    url: str
    ends_at: datetime | None
    time_left: timedelta | None
    # "Submit as a training job": the owner's, once JupyterLab has started (sessions.to_run).
    job_id: int = 0
    may_submit_run: bool = False


def session_ends_at(*, job: Job, attempt: Attempt) -> datetime | None:
    """When a started session reaches its time limit (Slurm stops it then)."""
    return None if attempt.started_at is None else attempt.started_at + job.time_limit


def session_card(
    *, job: Job, attempts: list[Attempt], user: Viewer | None, now: datetime
) -> SessionCard | None:
    """None for a job that is no session; the latest attempt decides whether it runs."""
    if job.template != Template.JUPYTER:
        return None
    latest = attempts[-1] if attempts else None
    running = latest is not None and latest.state == State.RUNNING
    ends_at = session_ends_at(job=job, attempt=latest) if running and latest else None
    left = None if ends_at is None else max(ends_at - now, timedelta(0))
    if left is not None:
        left = timedelta(seconds=int(left.total_seconds()))
    return SessionCard(
        running=running,
        may_open=may_open(user=user, job=job),
        url=lab_base_url(job.pk),
        ends_at=ends_at,
        time_left=left,
        job_id=job.pk,
        may_submit_run=signed_in(user)
        and job.user_id == user.pk
        and any(a.started_at is not None for a in attempts),
    )
