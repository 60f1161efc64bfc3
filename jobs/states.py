"""The attempt state machine: which changes are legal, and applying one with its event."""

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from jobs.billing import attempt_settle
from jobs.enums import FINAL_STATES, State
from jobs.models import Attempt, Job, JobEvent
from portal_lib.queueing import queue_on_commit

RELEASE_LINE = "jobs.tasks.release_line"

_SLURM_STATES = frozenset({State.PENDING, State.RUNNING, State.COMPLETING, *FINAL_STATES}) - {
    State.FAILED
}

ALLOWED: dict[str, frozenset[str]] = {
    # Released from the project's line (a reservation made), cancelled, or refused at release.
    State.WAITING: frozenset({State.QUEUED, State.CANCELLED, State.FAILED}),
    State.QUEUED: frozenset({State.SUBMITTING, State.CANCELLED, State.FAILED}),
    # Submission may find the job already past pending (adoption after a lost reply).
    State.SUBMITTING: _SLURM_STATES | {State.QUEUED, State.FAILED, State.UNKNOWN},
    State.PENDING: _SLURM_STATES | {State.FAILED, State.UNKNOWN},
    # Slurm requeues a running job whose node failed: back to pending.
    State.RUNNING: _SLURM_STATES | {State.FAILED, State.UNKNOWN},
    State.COMPLETING: _SLURM_STATES | {State.FAILED, State.UNKNOWN},
    State.UNKNOWN: _SLURM_STATES | {State.FAILED},
    **{final: frozenset() for final in FINAL_STATES},
}


class IllegalTransition(Exception):
    pass


def can_transition(current: str, new: str) -> bool:
    return new in ALLOWED.get(current, frozenset())


@transaction.atomic
def attempt_note(*, attempt: Attempt, reason: str, at: datetime | None = None) -> JobEvent:
    """An event without a change of state: the timeline says what was decided and why."""
    return JobEvent.objects.create(
        job_id=attempt.job_id,
        attempt=attempt,
        time=at or timezone.now(),
        from_state=attempt.state,
        to_state=attempt.state,
        reason=reason,
    )


@transaction.atomic
def attempt_transition(
    *,
    attempt: Attempt,
    to: str,
    reason: str = "",
    at: datetime | None = None,
    **fields: Any,
) -> bool:
    """Move an attempt (and its job) to a new state, recording the event, in one transaction.

    Guarded by the state the caller saw: if another worker changed it
    meanwhile, nothing is written and False is returned. Staying in the same
    state only updates the given fields (no event).
    """
    at = at or timezone.now()
    current = attempt.state
    if to == current:
        if fields:
            Attempt.objects.filter(pk=attempt.pk, state=current).update(**fields)
            for name, value in fields.items():
                setattr(attempt, name, value)
        return True
    if not can_transition(current, to):
        raise IllegalTransition(f"attempt {attempt.pk}: {current} -> {to} is not allowed")
    values = {"state": to, "state_changed_at": at, "reason": reason, **fields}
    if to in FINAL_STATES and not values.get("slurm_job_id", attempt.slurm_job_id):
        # Never given to Slurm (or its id never came back): no poll will read anything of it.
        values["files_complete"] = True
    updated = Attempt.objects.filter(pk=attempt.pk, state=current).update(**values)
    if not updated:
        return False
    for name, value in values.items():
        setattr(attempt, name, value)
    JobEvent.objects.create(
        job_id=attempt.job_id,
        attempt=attempt,
        time=at,
        from_state=current,
        to_state=to,
        reason=reason,
    )
    # The job shows its latest attempt's state, read in the same statement: when
    # two workers race, the last statement still writes the attempt's current state.
    latest = Attempt.objects.filter(job_id=OuterRef("pk")).order_by("-number").values("state")[:1]
    Job.objects.filter(pk=attempt.job_id).update(state=Subquery(latest), updated_at=at)
    if to in FINAL_STATES:
        # Frees the attempt's GPUs and charges what it used, in this transaction; the
        # project's line is then looked at for a waiting job that fits.
        attempt_settle(attempt=attempt)
        queue_on_commit(RELEASE_LINE, attempt.job.project_id)
    return True
