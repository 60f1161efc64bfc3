"""A checkpoint a person chose to resume or fork from, and where an automatic restart resumes.

A person names a checkpoint by its step (the newest attempt's, when several attempts
saved that step) or by its attempt and name, as the job page's checkpoint list does.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import User

from jobs.errors import JobError
from jobs.lineage import ForkPoint, require_resumer
from jobs.models import Attempt, Job
from jobs.resume import job_resume
from monitoring.checkpoints.registry import checkpoint_path, parse_step
from monitoring.models import Checkpoint

_LISTED_STEPS = 12  # steps named in a "no such checkpoint" message


def checkpoint_chosen(
    *, job: Job, step: int | None = None, attempt: int | None = None, name: str = ""
) -> Checkpoint:
    """The complete checkpoint of the job that the choice names, or a JobError saying which
    ones there are."""
    if step is None and not name:
        raise JobError(
            "Name the checkpoint: its step, or its attempt and name.",
            errors={"step": ["Give the step of the checkpoint to start from."]},
        )
    rows = Checkpoint.objects.filter(attempt__job=job).select_related("attempt__account")
    if attempt is not None:
        rows = rows.filter(attempt__number=attempt)
    if name:
        rows = rows.filter(name=name)
    if step is not None:
        rows = rows.filter(step=step)
    found = list(rows.order_by("-attempt__number", "-modified_at")[:2])
    complete = [c for c in found if c.complete]
    if complete:
        return complete[0]
    what = _described(step=step, attempt=attempt, name=name)
    if found:
        raise JobError(f"Checkpoint {what} of job #{job.pk} is not complete: choose another.")
    steps = sorted(
        {
            s
            for s in Checkpoint.objects.filter(attempt__job=job, complete=True, step__isnull=False)
            .order_by("-step")
            .values_list("step", flat=True)[:_LISTED_STEPS]
            if s is not None
        }
    )
    have = f"it has steps {', '.join(map(str, steps))}" if steps else "it has no checkpoint yet"
    raise JobError(
        f"Job #{job.pk} has no checkpoint {what} ({have}).",
        errors={"step": [f"No checkpoint {what}; {have}."]},
    )


def _described(*, step: int | None, attempt: int | None, name: str) -> str:
    parts = [f"at step {step}"] if step is not None else []
    if name:
        parts.append(f"named {name}")
    if attempt is not None:
        parts.append(f"of attempt {attempt}")
    return " ".join(parts)


def fork_point(checkpoint: Checkpoint) -> ForkPoint:
    """What a fork from the checkpoint records, and what its job must be able to read."""
    return ForkPoint(
        parent=checkpoint.attempt.job,
        checkpoint=checkpoint_path(checkpoint),
        step=checkpoint.step,
        account=checkpoint.attempt.account,
    )


def checkpoint_resume(
    *, job: Job, user: User, step: int | None = None, attempt: int | None = None, name: str = ""
) -> Attempt:
    """Resume the ended job from the checkpoint the person chose: its next attempt."""
    require_resumer(user=user, job=job)  # before naming what the job has saved
    chosen = checkpoint_chosen(job=job, step=step, attempt=attempt, name=name)
    return job_resume(job=job, user=user, checkpoint=checkpoint_path(chosen), step=chosen.step)


@dataclass(frozen=True)
class Saved:
    """A complete checkpoint with a step: which attempt saved it, and where it lies."""

    attempt: int  # the attempt's number
    step: int
    path: str


def line_point(*, attempt: Attempt, saved: Iterable[Saved]) -> tuple[str, int | None]:
    """Where an automatic restart after `attempt` resumes: its own newest checkpoint, else
    the checkpoint it had resumed from itself (a resume by hand, a fork that failed before
    saving), else the job's newest. Path and step; ('', None): from the start.

    The attempt's own line, so that a job resumed by hand from step 20 after reaching 60
    does not jump back to 60."""
    saved = list(saved)
    own = max((s for s in saved if s.attempt == attempt.number), key=_newest, default=None)
    if own is not None:
        return own.path, own.step
    if attempt.resume_from:
        return attempt.resume_from, _step_of(attempt)
    newest = max(saved, key=_newest, default=None)
    return (newest.path, newest.step) if newest else ("", None)


def _newest(saved: Saved) -> tuple[int, int]:
    return saved.step, saved.attempt


def restart_point(*, attempt: Attempt) -> tuple[str, int | None]:
    """line_point over the job's complete checkpoints (one query)."""
    rows = Checkpoint.objects.filter(
        attempt__job_id=attempt.job_id, complete=True, step__isnull=False
    ).select_related("attempt")
    return line_point(
        attempt=attempt,
        saved=[
            Saved(c.attempt.number, c.step, checkpoint_path(c)) for c in rows if c.step is not None
        ],
    )


def _step_of(attempt: Attempt) -> int | None:
    """The step of the checkpoint the attempt resumed from: its job's lineage, else its name."""
    job = attempt.job
    if job.parent_checkpoint and attempt.resume_from == job.parent_checkpoint:
        return job.parent_step
    return parse_step(attempt.resume_from.rsplit("/", 1)[-1])
