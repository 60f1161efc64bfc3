"""A contended project on the sandbox: jobs over its concurrent-GPU cap wait in its line.

Seven 1-GPU jobs for a project capped at 4 concurrent GPUs (the sandbox has 6 GPUs over
3 nodes, so Slurm itself would run 6): all are accepted, four run, three wait; the last
is cancelled while it waits and never reaches Slurm; the other two start, in the order
they came, as running jobs end. A real Celery worker with beat; Slurm lists one job per
attempt that ran and none for the cancelled one.
"""

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.enums import State
from jobs.models import Attempt, Job, JobEvent
from jobs.queue.line import jobs_waiting
from jobs.services import job_cancel, job_submit
from projects.models import Quota
from tests.chaos.harness import TRAINER, assert_exactly_once, slurm_jobs_named, wait_finished
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, wait_for

pytestmark = pytest.mark.sandbox

CAP = 4


def _submit(researcher, project, cluster, name: str) -> Job:
    return job_submit(
        user=researcher,
        project=project,
        cluster=cluster,
        spec=spec(name=name, command=TRAINER, gpus_per_node=1, time_limit=timedelta(minutes=8)),
    )


def _attempt(job: Job) -> Attempt:
    return Attempt.objects.get(job=job, number=1)


def _states(jobs: list[Job]) -> list[str]:
    return [_attempt(job).state for job in jobs]


def _stop(job: Job) -> None:
    Path(_attempt(job).run_dir, "stop").touch()


def _running(jobs: list[Job]) -> bool:
    return all(state == State.RUNNING for state in _states(jobs))


def test_six_jobs_over_a_four_gpu_cap_wait_in_line_and_run_in_order(
    celery_worker, researcher, project, sandbox_cluster, sandbox_info
) -> None:
    since = timezone.now()
    Quota.objects.filter(project=project).update(max_concurrent_gpus=CAP)
    jobs = [_submit(researcher, project, sandbox_cluster, f"line {n}") for n in range(7)]
    first, waiting, cancelled = jobs[:CAP], jobs[CAP:6], jobs[6]
    # All accepted: four for Slurm, three in the project's line with their places.
    assert [job.state for job in jobs] == [State.QUEUED] * CAP + [State.WAITING] * 3
    places = jobs_waiting([Job.objects.get(pk=job.pk) for job in jobs])
    assert [places[job.pk].place.number for job in jobs[CAP:]] == [1, 2, 3]
    assert "4 of its 4 concurrent GPUs in use" in places[waiting[0].pk].reason

    job_cancel(job=cancelled, user=researcher)
    assert _attempt(cancelled).state == State.CANCELLED
    wait_for(lambda: _running(first), QUEUE_WAIT, "the first four jobs to run")
    # Slurm has room for two more, but the project does not: they still wait.
    assert _states(waiting) == [State.WAITING, State.WAITING]

    _stop(first[0])
    wait_for(lambda: _running(waiting[:1]), QUEUE_WAIT, "the first waiting job to run")
    assert _states(waiting[1:]) == [State.WAITING]
    _stop(first[1])
    wait_for(lambda: _running(waiting[1:]), QUEUE_WAIT, "the second waiting job to run")

    for job in [*first[2:], *waiting]:
        _stop(job)
    ran = wait_finished(jobs[:6])
    assert [(a.state, a.exit_code) for a in ran] == [(State.COMPLETED, 0)] * 6
    # In the order they came: the first waiting job left the line before the second.
    left = [
        JobEvent.objects.get(job=job, from_state=State.WAITING, to_state=State.QUEUED).time
        for job in waiting
    ]
    assert left[0] < left[1]
    assert_exactly_once(ran, since=since, accounting=sandbox_info.accounting)
    # The cancelled one never reached Slurm: no Slurm job carries its attempt's name.
    gone = _attempt(cancelled)
    assert gone.slurm_job_id == "" and gone.submitted_at is None
    named = slurm_jobs_named([gone.slurm_job_name], since=since, accounting=sandbox_info.accounting)
    assert named == {}
