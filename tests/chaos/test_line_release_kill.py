"""The Celery worker (with beat) killed -9 while it releases a waiting job from its
project's line; supervise starts it again, as under `make run`.

A project capped at one concurrent job: one runs, one waits. The running one is told
to stop, and the worker is killed at one of two moments:
- the moment the running attempt has ended: the release it queued dies with the worker
  (or has not run yet), and the beat's sweep of the lines must release the job;
- the moment the waiting job leaves the line (the release committed): its submission
  may die half-way, and the reconciler and the submission's lease must make one job.
Either way the waiting job runs, and Slurm lists exactly one job for its attempt.
"""

import contextlib
import os
import signal
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import close_old_connections
from django.utils import timezone

from devtools import servers
from jobs.enums import FINAL_STATES, State
from jobs.models import Attempt, Job
from jobs.services import job_submit
from projects.models import Quota
from tests.chaos.harness import TRAINER, assert_all_intact, attempts, wait_running
from tests.chaos.processes import SupervisedWorker
from tests.factories import spec
from tests.fixtures.sandbox import descendants
from tests.fixtures.servers import live_env
from tests.helpers import worker_tag

pytestmark = pytest.mark.sandbox


def _submit(researcher, project, cluster, name: str) -> Job:
    return job_submit(
        user=researcher,
        project=project,
        cluster=cluster,
        spec=spec(name=name, command=TRAINER, gpus_per_node=1, time_limit=timedelta(minutes=8)),
    )


def _state(job: Job) -> str:
    close_old_connections()
    return str(Attempt.objects.filter(job=job).values_list("state", flat=True).get())


def _kill_when(worker: SupervisedWorker, moment: Callable[[], bool]) -> int:
    """kill -9 the worker (its pool and beat too) the moment `moment()` holds; its pid."""
    pid = worker.worker_pid()
    assert pid is not None
    victims = [pid, *descendants(pid)]
    deadline = time.monotonic() + 120
    while not moment():
        assert time.monotonic() < deadline, "the moment to kill never came in 120 s"
        time.sleep(0.002)
    for victim in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
    return pid


@pytest.mark.parametrize("moment", ["ended", "released"])
def test_a_worker_killed_while_releasing_makes_one_slurm_job(
    moment: str, researcher, project, sandbox_cluster, sandbox_info, tmp_path: Path
) -> None:
    since = timezone.now()
    Quota.objects.filter(project=project).update(max_concurrent_jobs=1)
    env = live_env()
    servers.purge_queue(env)
    worker = SupervisedWorker(env, tmp_path, name=f"line-worker-{worker_tag()}")
    with servers.running(worker):
        running = _submit(researcher, project, sandbox_cluster, "runs first")
        waiting = _submit(researcher, project, sandbox_cluster, "waits")
        assert (running.state, waiting.state) == (State.QUEUED, State.WAITING)
        wait_running([running])
        assert _state(waiting) == State.WAITING
        Path(attempts([running])[0].run_dir, "stop").touch()
        if moment == "ended":
            old = _kill_when(worker, lambda: _state(running) in FINAL_STATES)
        else:
            old = _kill_when(worker, lambda: _state(waiting) != State.WAITING)
        worker.wait_replaced(old)
        wait_running([waiting])
        Path(attempts([waiting])[0].run_dir, "stop").touch()
        # Each attempt completed once, with one Slurm job of its own name.
        assert_all_intact([running, waiting], since=since, accounting=sandbox_info.accounting)
    assert worker.restarts() >= 1
