"""Which queues live workers take, on the real Redis (portal_lib.worker_queues)."""

from collections.abc import Iterator

import pytest
import redis
from celery import current_app
from django.conf import settings

from portal_lib import worker_queues
from portal_lib.worker_queues import (
    POLLS_QUEUE,
    TENANTS_QUEUE,
    Heartbeat,
    advertise,
    cluster_queue,
    poll_queue,
    served_queues,
    withdraw,
)
from tests.helpers import wait_for, worker_tag


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.REDIS_URL)
    key = f"test:worker-queues:{worker_tag()}"
    monkeypatch.setattr(worker_queues, "REGISTRY", key)
    client.delete(key)
    yield client
    client.delete(key)


def test_a_live_workers_queues_are_served(client: redis.Redis) -> None:
    advertise(client, "a@host", ["celery", cluster_queue("gpu-a")])
    advertise(client, "b@host", ["celery", cluster_queue("gpu-b")])
    assert served_queues(client) == {"celery", "cluster.gpu-a", "cluster.gpu-b"}
    withdraw(client, "a@host")
    assert served_queues(client) == {"celery", "cluster.gpu-b"}


def test_a_worker_that_stops_writing_is_dropped_after_its_deadline(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_queues, "HEARTBEAT_TTL", 3.0)
    advertise(client, "dead@host", [cluster_queue("gpu-a")])
    monkeypatch.setattr(worker_queues, "HEARTBEAT_TTL", 60.0)
    advertise(client, "live@host", ["celery"])
    assert served_queues(client) == {"celery", "cluster.gpu-a"}
    wait_for(lambda: served_queues(client) == {"celery"}, 30, "the dead worker's deadline")
    assert client.hkeys(worker_queues.REGISTRY) == [b"live@host"]  # the stale entry removed


def test_a_garbled_entry_counts_as_dead(client: redis.Redis) -> None:
    client.hset(worker_queues.REGISTRY, "odd@host", "soon cluster.gpu-a")
    assert served_queues(client) == set()


def test_the_heartbeat_advertises_until_stopped(client: redis.Redis) -> None:
    beat = Heartbeat(client, "w@host", [cluster_queue("gpu-a"), "celery"])
    beat.start()
    try:
        wait_for(lambda: "cluster.gpu-a" in served_queues(client), 30, "the first heartbeat")
    finally:
        beat.stop()
    assert served_queues(client) == set()


def test_a_clusters_polls_go_to_its_own_worker_else_the_polls_queue_else_anyone() -> None:
    own = cluster_queue("gpu-a")
    assert poll_queue("gpu-a", {"celery", POLLS_QUEUE, own}) == own
    # Workers without -Q take the polls queue beside the default one, in turn: a burst
    # of submissions on the default queue does not hold the polls back.
    assert poll_queue("gpu-a", {"celery", POLLS_QUEUE, cluster_queue("gpu-b")}) == POLLS_QUEUE
    # Only workers started with -Q cluster.x,celery alive: the default queue, theirs too.
    assert poll_queue("gpu-a", {"celery", cluster_queue("gpu-b")}) == "celery"
    assert poll_queue("gpu-a", set()) == "celery"  # Redis unread: as before queues


def test_beats_poll_fan_out_goes_to_the_polls_queue_while_a_worker_takes_it(
    client: redis.Redis,
) -> None:
    """On the default queue the fan-out waited behind a thousand submissions and expired
    unrun (bench/soak.py); Celery's own router decides with portal.celery.route_task."""
    router = current_app.amqp.router

    def queue_of(task: str) -> str:
        return router.route({}, task)["queue"].name

    assert queue_of("jobs.tasks.poll_active_clusters") == "celery"  # nobody takes polls
    advertise(client, "w@host", ["celery", POLLS_QUEUE])
    assert queue_of("jobs.tasks.poll_active_clusters") == POLLS_QUEUE
    assert queue_of("jobs.tasks.submit_attempt") == "celery"  # every other task as before


def test_a_tenants_task_goes_to_the_tenants_queue_while_a_worker_takes_it(
    client: redis.Redis,
) -> None:
    """A session's server that answers just under its deadline held a default worker 10 s
    in every 30: on a queue apart, it holds the tenants' worker only."""
    router = current_app.amqp.router

    def queue_of(task: str) -> str:
        return router.route({}, task)["queue"].name

    tenants = ("monitoring.tasks.ask_session_kernels", "monitoring.tasks.deliver_alert")
    assert {queue_of(task) for task in tenants} == {"celery"}  # nobody takes it: as before
    advertise(client, "w@host", ["celery", POLLS_QUEUE])
    assert {queue_of(task) for task in tenants} == {"celery"}
    advertise(client, "t@host", [TENANTS_QUEUE])
    assert {queue_of(task) for task in tenants} == {TENANTS_QUEUE}
    assert queue_of("monitoring.tasks.request_stacks") == TENANTS_QUEUE
    assert queue_of("jobs.tasks.submit_attempt") == "celery"
    assert queue_of("jobs.tasks.poll_active_clusters") == POLLS_QUEUE
    # The default workers never take it: a worker without -Q reads these queues only.
    assert TENANTS_QUEUE not in {queue.name for queue in settings.CELERY_TASK_QUEUES}
