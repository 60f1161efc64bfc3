"""Idle GPUs on the sandbox: a job that holds a GPU and sleeps is warned, then cancelled; a job
that computes under the same policy is left alone.

The stand-in nvidia-smi reads what each job's processes do, so the sleeping job's GPU
really reads idle and the computing one's busy; the decision comes from each job's
own GPU samples as the portal stored them.
"""

from datetime import timedelta

import pytest
from django.test import Client

from jobs.enums import State
from jobs.models import Attempt, Job, JobEvent
from jobs.services import job_cancel, job_submit
from monitoring.models import AttemptActivity
from monitoring.series.read import series_read
from projects.models import IdlePolicy
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, wait_for

pytestmark = pytest.mark.sandbox

SLEEPER = "python3 -c 'import time; time.sleep(600)'"
# Half busy, half asleep: well over the threshold, and gentle with a shared machine.
WORKER = (
    "python3 -c 'import time\n"
    "while True:\n"
    "    end = time.time() + 0.5\n"
    "    while time.time() < end: pass\n"
    "    time.sleep(0.3)'"
)


def _attempt(job: Job) -> Attempt:
    return Attempt.objects.get(job=job, number=1)


def _utilisation(attempt: Attempt) -> list[float]:
    node = attempt.node_list
    names = [f"gpu/{node}/{i}/utilization" for i in range(2)]
    return [y for name in names for y in series_read(attempt_id=attempt.pk, name=name).ys]


def test_a_sleeping_job_is_warned_then_cancelled_and_a_computing_one_is_not(
    celery_worker, researcher, project, sandbox_cluster
) -> None:
    IdlePolicy.objects.create(
        project=project,
        threshold_percent=10,
        warn_after=timedelta(seconds=15),
        cancel_after=timedelta(seconds=10),
    )
    limit = timedelta(minutes=10)
    sleeper = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(command=SLEEPER, gpus_per_node=1, time_limit=limit, name="sleeps"),
    )
    worker = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(command=WORKER, gpus_per_node=1, time_limit=limit, name="computes"),
    )
    try:
        member = Client()
        member.force_login(researcher)
        pages: list[str] = []

        def warned_on_page() -> bool:
            if not AttemptActivity.objects.filter(
                attempt__job=sleeper, warned_at__isnull=False
            ).exists():
                return False
            pages.append(member.get(f"/jobs/{sleeper.pk}/").content.decode())
            return 'id="idle-warned-at"' in pages[-1]

        wait_for(warned_on_page, QUEUE_WAIT, "the sleeping job to be warned on its page")
        assert 'id="idle-cancel-at"' in pages[-1]  # the ladder: when it will be cancelled
        wait_for(
            lambda: _attempt(sleeper).state == State.CANCELLED,
            120,
            "the sleeping job to be cancelled by the idle policy",
        )
        assert JobEvent.objects.filter(
            job=sleeper, reason__startswith="Cancelled by the project's idle-GPU policy"
        ).exists()
        slept = _utilisation(_attempt(sleeper))
        assert slept and max(slept) < 10, slept  # the honest stand-in: a sleeping GPU is idle

        # The computing job ran all along under the same policy: never warned, still running.
        # The computing job may have started later (it can queue behind other tests' jobs):
        # judge it on ten samples of its own, however long they take to come.
        wait_for(lambda: len(_utilisation(_attempt(worker))) >= 10, QUEUE_WAIT, "10 samples")
        computed = _attempt(worker)
        assert computed.state == State.RUNNING, computed.reason
        busy = _utilisation(computed)
        assert sorted(busy)[len(busy) // 2] >= 10, busy
        activity = AttemptActivity.objects.filter(attempt=computed).first()
        assert activity is None or (activity.warned_at is None and activity.cancelled_at is None)
        assert computed.cancel_requested_at is None
    finally:
        for job in (sleeper, worker):
            job_cancel(job=job, user=researcher)
        wait_for(
            lambda: all(_attempt(j).is_finished for j in (sleeper, worker)),
            120,
            "both jobs to end",
        )
