"""Redis killed -9 and started again, empty, while jobs run: twice.

The portal's servers here use a redis-server of the test's own (broker, poll lease,
channel layer), never the one the suite shares. The worker runs under supervise, as
under `make run`, and must survive the broker's loss (issue 18 saw it exit for good in
kombu's restore of unacked messages, which portal/broker.py keeps from ending it);
polling resumes and nothing is lost. A job submitted after the last restart runs as well.
"""

import time
from pathlib import Path

import pytest
from celery import current_app
from django.utils import timezone

from devtools import servers
from tests.chaos.harness import (
    assert_all_intact,
    returned,
    seconds_to_recover,
    stop,
    submit,
    wait_running,
)
from tests.chaos.processes import SupervisedWorker
from tests.fixtures.servers import live_env
from tests.helpers import worker_tag
from tests.throwaway import ThrowawayRedis, use_broker

pytestmark = pytest.mark.sandbox

CYCLES = 2
OUTAGE = 3.0  # seconds Redis stays away; the jobs write on


def test_redis_killed_and_restarted_empty_while_jobs_run_loses_nothing(
    researcher, project, sandbox_cluster, sandbox_info, chaos_report, tmp_path: Path
) -> None:
    since = timezone.now()
    redis_server = ThrowawayRedis()
    broker = current_app.conf.broker_url
    use_broker(redis_server.url)  # this process queues the submissions there too
    env = {**live_env(), "REDIS_URL": redis_server.url, "CELERY_BROKER_URL": redis_server.url}
    worker = SupervisedWorker(env, tmp_path, name=f"chaos-redis-{worker_tag()}")
    try:
        with servers.running(worker):
            jobs = [submit(researcher, project, sandbox_cluster, f"steady {n}") for n in range(2)]
            running = [a.pk for a in wait_running(jobs)]
            for cycle in range(1, CYCLES + 1):
                restarts = worker.restarts()
                redis_server.kill()
                time.sleep(OUTAGE)
                redis_server.start()
                seconds = seconds_to_recover(running, returned(running), "Redis came back")
                after = worker.restarts() - restarts
                chaos_report(
                    f"redis-kill-restart-{cycle}",
                    seconds,
                    f"down {OUTAGE:.0f} s, back empty; the worker "
                    + (f"exited and was restarted {after} times" if after else "survived"),
                )
                # kombu's restore through a dropped transport ended it (portal/broker.py).
                assert after == 0, f"the worker exited; its log:\n{worker.log_tail()}"
            jobs.append(submit(researcher, project, sandbox_cluster, "after the restarts"))
            wait_running(jobs)
            stop(jobs)
            assert_all_intact(jobs, since=since, accounting=sandbox_info.accounting)
    finally:
        use_broker(broker)
        redis_server.kill()
