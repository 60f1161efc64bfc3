"""A project's line: jobs over its concurrency limits wait, and leave it first come first served.

Against the test database, with the submission's queueing recorded (no Celery): which
jobs wait, their places and reasons, the order they leave in, cancel while waiting, a
budget spent meanwhile, one project's line beside another's, and what queues a release.
"""

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import connection

from clusters.models import Cluster
from jobs import states
from jobs.enums import FailureClass, State
from jobs.errors import JobError
from jobs.models import Attempt, Job, JobEvent
from jobs.queue import line
from jobs.queue.line import jobs_waiting, line_release, lines_release
from jobs.restart import attempt_restart
from jobs.services import job_cancel, job_submit
from jobs.states import attempt_transition
from projects.models import Membership, Project, Quota, Reservation
from tests import factories

PARTITIONS = {"gpu": factories.GPU_PARTITION}


@pytest.fixture
def released(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The submissions line_release queues, recorded instead of sent."""
    queued: list[int] = []
    monkeypatch.setattr(
        line, "queue_on_commit", lambda _name, attempt_id, **_: queued.append(attempt_id)
    )
    return queued


def _submit(user: User, project: Project, cluster: Cluster, gpus: int = 1) -> Job:
    nodes, per_node = {1: (1, 1), 2: (1, 2), 4: (2, 2)}[gpus]  # the partition: 2 x 2 GPUs
    spec = factories.spec(nodes=nodes, gpus_per_node=per_node, time_limit=timedelta(hours=1))
    return job_submit(user=user, project=project, cluster=cluster, spec=spec, partitions=PARTITIONS)


def _cap(project: Project, gpus: int) -> None:
    Quota.objects.filter(project=project).update(max_concurrent_gpus=gpus)


def _end(job: Job) -> None:
    """The job's attempt ran and ended: its GPUs are free."""
    attempt = job.attempts.get()
    attempt_transition(attempt=attempt, to=State.SUBMITTING)
    attempt_transition(attempt=attempt, to=State.PENDING, slurm_job_id=str(1000 + attempt.pk))
    attempt_transition(attempt=attempt, to=State.COMPLETED)


def _states(jobs: list[Job]) -> list[str]:
    return [Job.objects.get(pk=job.pk).state for job in jobs]


def test_over_the_gpu_limit_a_job_waits_with_its_place_and_reason(
    submitter, project, cluster, no_submission
) -> None:
    _cap(project, 2)
    jobs = [_submit(submitter, project, cluster) for _ in range(4)]
    assert _states(jobs) == [State.QUEUED, State.QUEUED, State.WAITING, State.WAITING]
    waiting = jobs_waiting(Job.objects.all())
    assert [
        (w.place.number, w.place.length) for w in (waiting[jobs[2].pk], waiting[jobs[3].pk])
    ] == [
        (1, 2),
        (2, 2),
    ]
    assert waiting[jobs[3].pk].place.words == "Place 2 of 2 in project vision's line."
    assert waiting[jobs[2].pk].reason == (
        "Waiting for room: project vision has 2 of its 2 concurrent GPUs in use and this job "
        "needs 1. It goes to Slurm when a job of the project ends."
    )
    # The fourth came when the third already waited: it waits behind it, whatever fits.
    assert waiting[jobs[3].pk].reason.startswith("Waiting for room: project vision has 2 of")
    # Waiting holds nothing: no reservation, no submission, and the timeline says why.
    assert Reservation.objects.count() == 2
    assert no_submission == [jobs[0].attempts.get().pk, jobs[1].attempts.get().pk]
    event = JobEvent.objects.get(job=jobs[2])
    assert (event.to_state, event.reason) == (
        State.WAITING,
        f"Submitted by {submitter.username}. {waiting[jobs[2].pk].reason}",
    )


def test_room_released_goes_to_the_waiting_jobs_in_the_order_they_came(
    submitter, project, cluster, no_submission, released
) -> None:
    _cap(project, 2)
    jobs = [_submit(submitter, project, cluster) for _ in range(5)]
    assert line_release(project_id=project.pk) == []  # no room yet
    _end(jobs[0])
    assert line_release(project_id=project.pk) == [jobs[2].attempts.get().pk]
    _end(jobs[1])
    _end(jobs[2])
    assert line_release(project_id=project.pk) == [a.attempts.get().pk for a in jobs[3:5]]
    assert released == [job.attempts.get().pk for job in jobs[2:5]]
    assert _states(jobs[2:]) == [State.COMPLETED, State.QUEUED, State.QUEUED]
    assert Reservation.objects.filter(ended_at__isnull=True).count() == 2
    event = JobEvent.objects.filter(job=jobs[3], to_state=State.QUEUED).get()
    assert event.reason == "Room in project vision: left the line for Slurm."


def test_first_come_first_served_even_when_a_smaller_job_behind_would_fit(
    submitter, project, cluster, no_submission, released
) -> None:
    _cap(project, 3)
    first = _submit(submitter, project, cluster, gpus=2)
    big = _submit(submitter, project, cluster, gpus=2)
    small = _submit(submitter, project, cluster, gpus=1)
    assert _states([first, big, small]) == [State.QUEUED, State.WAITING, State.WAITING]
    assert line_release(project_id=project.pk) == []  # 1 GPU free: the big one is first
    _end(first)
    assert line_release(project_id=project.pk) == [big.attempts.get().pk, small.attempts.get().pk]
    assert _states([big, small]) == [State.QUEUED, State.QUEUED]


def test_one_projects_line_never_holds_another_projects_jobs(
    submitter, project, cluster, no_submission, released
) -> None:
    other = Project.objects.create(slug="speech", name="Speech", slurm_account="speech")
    Quota.objects.create(
        project=other,
        gpu_hours_per_period=Decimal("100"),
        max_concurrent_gpus=1,
        max_wall_time=timedelta(hours=12),
    )
    Membership.objects.create(user=submitter, project=other, role=Membership.Role.MEMBER)
    _cap(project, 1)
    mine = [_submit(submitter, project, cluster) for _ in range(3)]
    theirs = _submit(submitter, other, cluster)
    assert _states([*mine, theirs]) == [State.QUEUED, State.WAITING, State.WAITING, State.QUEUED]
    assert jobs_waiting([mine[2]])[mine[2].pk].place.words == (
        "Place 2 of 2 in project vision's line."
    )
    assert line_release(project_id=other.pk) == []


def test_a_job_that_never_fits_or_is_over_budget_is_refused_not_waiting(
    submitter, project, cluster, no_submission
) -> None:
    _cap(project, 2)
    with pytest.raises(JobError, match="more than the 2 concurrent GPUs project vision allows"):
        _submit(submitter, project, cluster, gpus=4)
    Quota.objects.filter(project=project).update(gpu_hours_per_period=Decimal("2"))
    _submit(submitter, project, cluster, gpus=2)
    with pytest.raises(JobError, match=r"^needs 1 GPU-h, 0 GPU-h left this month in project"):
        _submit(submitter, project, cluster)
    assert Job.objects.count() == 1


def test_cancel_while_waiting_ends_it_before_slurm_and_moves_the_line_up(
    submitter, project, cluster, no_submission, released
) -> None:
    _cap(project, 1)
    running, first, second = (_submit(submitter, project, cluster) for _ in range(3))
    job_cancel(job=first, user=submitter)
    attempt = first.attempts.get()
    assert (attempt.state, attempt.slurm_job_id) == (State.CANCELLED, "")
    assert (
        attempt.reason
        == f"Cancelled by {submitter.username} while waiting in line before submission."
    )
    assert (
        jobs_waiting([second])[second.pk].place.words
        == "Next in project vision's line (1 waiting)."
    )
    _end(running)
    assert line_release(project_id=project.pk) == [second.attempts.get().pk]
    assert attempt.pk not in released and attempt.pk not in no_submission


def test_a_budget_spent_while_waiting_fails_the_job_and_the_next_one_leaves(
    submitter, project, cluster, no_submission, released
) -> None:
    _cap(project, 1)
    running, spent, fits = (_submit(submitter, project, cluster, gpus=g) for g in (1, 1, 1))
    # The spent one asks for more hours now than the budget will have left.
    Job.objects.filter(pk=spent.pk).update(time_limit=timedelta(hours=11))
    Quota.objects.filter(project=project).update(gpu_hours_per_period=Decimal("10"))
    _end(running)
    assert line_release(project_id=project.pk) == [fits.attempts.get().pk]
    failed = spent.attempts.get()
    assert failed.state == State.FAILED
    assert failed.reason.startswith("Could not leave the line: needs 11 GPU-h, ")


def test_an_attempt_that_ends_queues_its_projects_release(
    submitter, project, cluster, no_submission, monkeypatch
) -> None:
    queued: list[tuple[str, tuple[object, ...]]] = []
    monkeypatch.setattr(
        states, "queue_on_commit", lambda name, *args, **_: queued.append((name, args))
    )
    job = _submit(submitter, project, cluster)
    _end(job)
    assert queued == [("jobs.tasks.release_line", (project.pk,))]


def test_the_sweep_releases_every_projects_line(
    submitter, project, cluster, no_submission, released
) -> None:
    _cap(project, 1)
    first, second = (_submit(submitter, project, cluster) for _ in range(2))
    assert lines_release() == 0
    Attempt.objects.filter(job=first).update(state=State.CANCELLED)
    Reservation.objects.update(ended_at=first.created_at, released_at=first.created_at)
    assert lines_release() == 1
    assert _states([second]) == [State.QUEUED]


@pytest.mark.django_db(transaction=True)
def test_two_workers_releasing_at_once_release_each_job_once(
    submitter, project, cluster, no_submission, released
) -> None:
    _cap(project, 1)
    jobs = [_submit(submitter, project, cluster) for _ in range(4)]
    _end(jobs[0])
    results: list[list[int]] = []

    def release() -> None:
        try:
            results.append(line_release(project_id=project.pk))
        finally:
            connection.close()

    workers = [threading.Thread(target=release) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(n for result in results for n in result) == [jobs[1].attempts.get().pk]
    assert released == [jobs[1].attempts.get().pk]
    assert _states(jobs[1:]) == [State.QUEUED, State.WAITING, State.WAITING]


def test_a_restart_that_finds_the_project_full_waits_and_the_job_says_so(
    submitter, project, cluster, no_submission
) -> None:
    _cap(project, 1)
    first, other = (_submit(submitter, project, cluster) for _ in range(2))
    attempt = first.attempts.get()
    Job.objects.filter(pk=first.pk).update(max_restarts=1)
    Attempt.objects.filter(pk=attempt.pk).update(state=State.FAILED, slurm_job_id="7")
    Reservation.objects.filter(attempt=attempt).update(
        ended_at=first.created_at, released_at=first.created_at
    )
    attempt.refresh_from_db()
    # The project is full again (another job runs): the restart waits behind the line.
    Attempt.objects.filter(job=other).update(state=State.RUNNING)
    Reservation.objects.create(
        attempt=other.attempts.get(),
        project=project,
        gpus=1,
        gpu_hours=1,
        created_at=first.created_at,
    )
    second = attempt_restart(
        attempt=attempt, failure_class=FailureClass.NODE_FAILURE, resume_from=""
    )
    assert second is not None and second.state == State.WAITING
    assert Job.objects.get(pk=first.pk).state == State.WAITING
