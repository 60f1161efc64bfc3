"""The Celery worker (with beat) killed -9 while jobs run: once in the middle of a poll of
the jobs' files (its lease held), once between polls; supervise starts it again, as under
`make run`.

A job is submitted just before each kill, so a submission may die with the worker too.
The lease of a poll killed midway ends within its short TTL (jobs/poll/lease.py).
"""

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from devtools import servers
from jobs.poll.cycle import FILES, PARTS
from jobs.poll.lease import lease_key
from tests.chaos.harness import (
    assert_all_intact,
    attempts,
    returned,
    seconds_to_recover,
    stop,
    submit,
    wait_running,
)
from tests.chaos.processes import SupervisedWorker
from tests.fixtures.sandbox import descendants
from tests.fixtures.servers import live_env
from tests.helpers import worker_tag

pytestmark = pytest.mark.sandbox

KILLS = (("worker-kill-mid-poll", True), ("worker-kill-between-polls", False))
TRIES = 3  # a poll that ends (or starts) between the look and the kill: killed again later


def _polling(client: redis.Redis, cluster_id: int, in_poll: bool) -> bool:
    """In a poll: one reading files (logs and metrics) holds its lease; between polls: none
    of the cluster's polls, of either part, holds one."""
    if in_poll:
        return bool(client.exists(lease_key(cluster_id, FILES)))
    return not client.exists(*(lease_key(cluster_id, part) for part in PARTS))


def _kill_when(
    worker: SupervisedWorker, client: redis.Redis, cluster_id: int, in_poll: bool
) -> bool:
    """kill -9 the worker the moment it is (or is not) polling; whether it was.

    The victims are listed first, so the look and the kill are microseconds apart; a dead
    worker cannot release a lease, so the leases after the kill say where it struck.
    """
    pid = worker.worker_pid()
    assert pid is not None
    victims = [pid, *descendants(pid)]
    deadline = time.monotonic() + 60
    while not _polling(client, cluster_id, in_poll):
        assert time.monotonic() < deadline, f"no {'poll' if in_poll else 'pause'} in 60 s"
        time.sleep(0.002)
    for victim in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
    return _polling(client, cluster_id, in_poll)


def test_a_worker_killed_in_and_between_polls_loses_nothing(
    researcher, project, sandbox_cluster, sandbox_info, chaos_report, tmp_path: Path
) -> None:
    since = timezone.now()
    env = live_env()
    servers.purge_queue(env)
    worker = SupervisedWorker(env, tmp_path, name=f"chaos-worker-{worker_tag()}")
    client = redis.Redis.from_url(settings.REDIS_URL)
    with servers.running(worker):
        jobs = [submit(researcher, project, sandbox_cluster, f"steady {n}") for n in range(2)]
        wait_running(jobs)
        for fault, in_poll in KILLS:
            for _ in range(TRIES):
                jobs.append(
                    submit(researcher, project, sandbox_cluster, f"at the kill {len(jobs)}")
                )
                running = [a.pk for a in attempts(jobs[:2])]
                old = worker.worker_pid()
                assert old is not None
                struck = _kill_when(worker, client, sandbox_cluster.pk, in_poll)
                killed = time.monotonic()
                back = worker.wait_replaced(old)
                seconds = seconds_to_recover(running, returned(running, at=back), fault)
                if struck:
                    break
            assert struck, f"{TRIES} kills all missed the moment for {fault}"
            chaos_report(
                fault,
                seconds,
                f"restarted by supervise {back - killed:.1f} s after the kill; "
                f"{worker.restarts()} restarts so far",
            )
        wait_running(jobs)
        stop(jobs)
        assert_all_intact(jobs, since=since, accounting=sandbox_info.accounting)
    assert worker.restarts() >= len(KILLS)
