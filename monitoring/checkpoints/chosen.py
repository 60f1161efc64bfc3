"""A checkpoint a person chose to resume or fork from, and where an automatic restart resumes.

A person names a checkpoint by its step (the newest attempt's, when several attempts
saved that step) or by its attempt and name, as the job page's checkpoint list does.
"""

from django.contrib.auth.models import User

from jobs.errors import JobError
from jobs.lineage import ForkPoint, require_resumer
from jobs.models import Attempt, Job
from jobs.resume import job_resume
from monitoring.checkpoints.registry import checkpoint_path, latest_complete, parse_step
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


def restart_point(*, attempt: Attempt) -> tuple[str, int | None]:
    """Where an automatic restart after `attempt` resumes: its own newest complete checkpoint,
    else the checkpoint it had resumed from itself (a resume by hand or a fork that failed
    before saving), else the job's latest. Path and step; ('', None): from the start."""
    own = (
        Checkpoint.objects.filter(attempt=attempt, complete=True, step__isnull=False)
        .select_related("attempt")
        .order_by("-step", "-modified_at")
        .first()
    )
    if own is not None:
        return checkpoint_path(own), own.step
    if attempt.resume_from:
        return attempt.resume_from, _step_of(attempt)
    latest = latest_complete(job_id=attempt.job_id)
    return (checkpoint_path(latest), latest.step) if latest else ("", None)


def _step_of(attempt: Attempt) -> int | None:
    """The step of the checkpoint the attempt resumed from: its job's lineage, else its name."""
    job = attempt.job
    if job.parent_checkpoint and attempt.resume_from == job.parent_checkpoint:
        return job.parent_step
    return parse_step(attempt.resume_from.rsplit("/", 1)[-1])
