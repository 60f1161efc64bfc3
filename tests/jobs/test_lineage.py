"""Resume a job from a chosen checkpoint, fork a new job from one, and who may do which."""

import dataclasses
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User

from clusters.models import ClusterAccount
from jobs.enums import State
from jobs.errors import JobError, JobPermissionRefused
from jobs.models import Attempt, Job, JobEvent
from jobs.scripts import RunDir, render_batch_script
from jobs.services import job_submit
from jobs.specs import spec_from_job
from monitoring.checkpoints.chosen import (
    checkpoint_chosen,
    checkpoint_resume,
    fork_point,
    restart_point,
)
from monitoring.checkpoints.index import PROTECTED_RESUME, checkpoint_index
from monitoring.job_page.selectors import job_failures
from monitoring.models import Checkpoint
from projects.models import Membership, Project, Quota
from tests import factories

RUN_DIR = "/home/svc/portal-runs/a1"
STEP_20 = f"{RUN_DIR}/checkpoints/step-20.pt"
_QUOTA = ("gpu_hours_per_period", "max_concurrent_gpus", "max_gpus_per_job", "max_wall_time")


def _saved(attempt: Attempt, *steps: int, complete: bool = True) -> None:
    for step in steps:
        Checkpoint.objects.create(
            attempt=attempt,
            name=f"step-{step}.pt",
            step=step,
            size=31277,
            modified_at=datetime(2026, 12, 6, 12, step % 60, tzinfo=UTC),
            complete=complete,
        )


@pytest.fixture
def parent(job: Job, service_account: ClusterAccount) -> Job:
    """The owner's ended 60-step run (shared service account) with checkpoints 20, 40, 60."""
    Job.objects.filter(pk=job.pk).update(
        state=State.COMPLETED, command="python train.py --lr 0.01 --steps 60"
    )
    job.refresh_from_db()
    attempt = job.attempts.get()
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.COMPLETED, account=service_account, run_dir=RUN_DIR
    )
    attempt.refresh_from_db()
    _saved(attempt, 20, 40, 60)
    return job


def _fork(parent: Job, user: User, *, project: Project | None = None, **changes: object) -> Job:
    spec = dataclasses.replace(spec_from_job(parent), name="forked", **changes)  # type: ignore[arg-type]
    return job_submit(
        user=user,
        project=project or parent.project,
        cluster=parent.cluster,
        spec=spec,
        fork=fork_point(checkpoint_chosen(job=parent, step=20)),
    )


def test_a_fork_records_its_parent_and_resumes_from_the_chosen_checkpoint(
    parent: Job, owner: User, no_submission: list[int]
) -> None:
    fork = _fork(parent, owner, command="python train.py --lr 0.003 --steps 60")
    assert (fork.parent, fork.parent_step, fork.parent_checkpoint) == (parent, 20, STEP_20)
    assert fork.params["lr"] == 0.003
    first = fork.attempts.get()
    assert first.resume_from == STEP_20
    assert no_submission == [first.pk]
    script = render_batch_script(job=fork, attempt=first, run_dir=RunDir("/home/svc/runs/f1"))
    assert f"export PORTAL_RESUME_FROM={STEP_20}" in script
    event = JobEvent.objects.get(attempt=first)
    assert event.reason == f"Forked by olivia from job #{parent.pk} at step 20 ({STEP_20})."


def test_a_fork_to_another_cluster_is_refused_naming_the_parents(
    parent: Job, owner: User, no_submission: list[int]
) -> None:
    elsewhere = factories.cluster("bern")
    factories.account(elsewhere, None)
    spec = spec_from_job(parent)
    with pytest.raises(JobError) as refused:
        job_submit(
            user=owner,
            project=parent.project,
            cluster=elsewhere,
            spec=spec,
            fork=fork_point(checkpoint_chosen(job=parent, step=20)),
        )
    assert "lies on cluster alps" in refused.value.message
    assert refused.value.errors["cluster"] == [refused.value.message]
    assert not Job.objects.filter(parent=parent).exists() and no_submission == []


def test_a_member_forks_in_the_project_when_the_run_directory_is_readable(
    parent: Job, member: User, no_submission: list[int]
) -> None:
    # The member's jobs run as the shared service account, which wrote the checkpoint.
    fork = _fork(parent, member)
    assert fork.user == member and fork.parent == parent


def test_a_fork_whose_account_cannot_read_the_checkpoint_is_refused(
    parent: Job, member: User, no_submission: list[int]
) -> None:
    factories.account(parent.cluster, member)  # the member's own account: another Unix user
    with pytest.raises(JobPermissionRefused) as refused:
        _fork(parent, member)
    assert refused.value.message == (
        f"Job #{parent.pk}'s checkpoint lies in a run directory only the cluster account svc "
        "can read; your jobs on alps run as mia. Ask olivia to fork it."
    )
    assert no_submission == []


def test_a_fork_leaves_the_project_only_for_its_owners_own_run(
    parent: Job, owner: User, member: User, no_submission: list[int]
) -> None:
    other = Project.objects.create(slug="nlp", name="NLP")
    Quota.objects.create(project=other, **{f: getattr(parent.project.quota, f) for f in _QUOTA})
    for user in (owner, member):
        Membership.objects.create(user=user, project=other, role=Membership.Role.MEMBER)
    with pytest.raises(JobPermissionRefused) as refused:
        _fork(parent, member, project=other)
    assert refused.value.errors["project"] == [
        f"Job #{parent.pk} is not yours: a fork of it stays in its project vision."
    ]
    assert _fork(parent, owner, project=other).project == other


def test_resume_starts_the_next_attempt_from_the_chosen_step(
    parent: Job, owner: User, no_submission: list[int]
) -> None:
    second = checkpoint_resume(job=parent, user=owner, step=20)
    assert (second.number, second.resume_from, second.state) == (2, STEP_20, State.QUEUED)
    assert second.account == parent.attempts.get(number=1).account
    parent.refresh_from_db()
    assert parent.state == State.QUEUED and no_submission == [second.pk]
    assert JobEvent.objects.get(attempt=second).reason == (
        f"Resumed by olivia at step 20 ({STEP_20})."
    )
    with pytest.raises(JobError, match="is still queued: cancel it first, or fork it"):
        checkpoint_resume(job=parent, user=owner, step=40)


def test_resume_is_for_the_submitter_or_an_owner(
    parent: Job, member: User, no_submission: list[int]
) -> None:
    with pytest.raises(JobPermissionRefused, match="fork it instead"):
        checkpoint_resume(job=parent, user=member, step=20)
    assert parent.attempts.count() == 1


def test_a_missing_or_incomplete_checkpoint_is_named(parent: Job) -> None:
    with pytest.raises(JobError) as missing:
        checkpoint_chosen(job=parent, step=25)
    assert missing.value.message == (
        f"Job #{parent.pk} has no checkpoint at step 25 (it has steps 20, 40, 60)."
    )
    _saved(parent.attempts.get(), 70, complete=False)
    with pytest.raises(JobError, match=r"at step 70 of job #\d+ is not complete"):
        checkpoint_chosen(job=parent, step=70)
    with pytest.raises(JobError, match="Name the checkpoint"):
        checkpoint_chosen(job=parent)


def test_the_newest_attempt_wins_when_two_saved_the_step(parent: Job) -> None:
    second = Attempt.objects.create(job=parent, number=2, state=State.COMPLETED)
    _saved(second, 20)
    assert checkpoint_chosen(job=parent, step=20).attempt == second
    assert checkpoint_chosen(job=parent, step=20, attempt=1).attempt.number == 1
    assert checkpoint_chosen(job=parent, attempt=1, name="step-40.pt").step == 40


def test_a_restart_goes_on_from_the_line_the_attempt_was_on(
    parent: Job, owner: User, no_submission: list[int]
) -> None:
    # Resumed by hand from step 20 after the run reached 60: the new line's checkpoints
    # count, never attempt 1's later ones.
    second = checkpoint_resume(job=parent, user=owner, step=20)
    assert restart_point(attempt=second) == (STEP_20, 20)
    Attempt.objects.filter(pk=second.pk).update(run_dir="/home/svc/portal-runs/a2")
    second.refresh_from_db()
    _saved(second, 30)
    assert restart_point(attempt=second) == ("/home/svc/portal-runs/a2/checkpoints/step-30.pt", 30)
    # A fork that failed before its first checkpoint restarts from its parent's.
    fork = _fork(parent, owner)
    assert restart_point(attempt=fork.attempts.get()) == (STEP_20, 20)


def test_the_job_page_marks_where_a_restart_would_resume_on_the_resumed_line(
    parent: Job, owner: User, no_submission: list[int]
) -> None:
    assert job_failures(job=parent)["resume_from"] == f"{RUN_DIR}/checkpoints/step-60.pt"
    second = checkpoint_resume(job=parent, user=owner, step=20)
    failures = job_failures(job=parent)
    # Attempt 2 has saved nothing yet: a restart would go back to step 20, not to 60.
    assert failures["resume_from"] == STEP_20
    assert [r.step for r in checkpoint_index(job_id=parent.pk) if r.resume] == [20]
    assert [(c.step, c.resume) for c in failures["checkpoints"]] == [
        (60, False),
        (40, False),
        (20, True),
    ]
    Attempt.objects.filter(pk=second.pk).update(run_dir="/home/svc/portal-runs/a2")
    _saved(Attempt.objects.get(pk=second.pk), 30)
    marked = [(c.attempt, c.step) for c in job_failures(job=parent)["checkpoints"] if c.resume]
    assert marked == [(2, 30)]
    # The checkpoint page's index says the same.
    assert [(r.attempt, r.step) for r in checkpoint_index(job_id=parent.pk) if r.resume] == [
        (2, 30)
    ]


def test_retention_keeps_the_checkpoint_a_fork_or_a_resume_starts_from(
    parent: Job, owner: User, no_submission: list[int]
) -> None:
    def protected() -> dict[int | None, str]:
        return {row.step: row.protected for row in checkpoint_index(job_id=parent.pk)}

    assert protected() == {60: "", 40: "", 20: ""}
    fork = _fork(parent, owner)
    assert protected()[20] == PROTECTED_RESUME  # the fork is another job: still kept
    Attempt.objects.filter(job=fork).update(state=State.COMPLETED)
    assert protected()[20] == ""
    checkpoint_resume(job=parent, user=owner, step=40)
    assert protected() == {60: "", 40: PROTECTED_RESUME, 20: ""}
