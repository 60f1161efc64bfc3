import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from kombu import Connection
from kombu.common import ignore_errors
from kombu.exceptions import OperationalError
from redis import Redis

from devtools import servers
from portal.celery import app
from portal.worker_consumer import Consumer
from tests.fixtures.servers import live_env
from tests.helpers import wait_for
from tests.throwaway import ThrowawayRedis


def test_celery_is_configured_for_at_least_once_json_tasks() -> None:
    conf = app.conf
    assert conf.broker_url == settings.REDIS_URL
    assert conf.task_serializer == "json"
    assert conf.accept_content == ["json"]
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert 0 < conf.task_soft_time_limit < conf.task_time_limit


def test_purging_empties_every_queue_of_the_app_and_nothing_else() -> None:
    """What a test's new worker starts from: no task a previous run left behind."""
    queues = {queue.name for queue in app.conf.task_queues}
    assert queues == {"celery", "polls"}
    other = f"other-{os.getpid()}"
    with Connection(settings.REDIS_URL) as connection:  # this xdist worker's own database
        for queue in queues:
            connection.SimpleQueue(queue).put({"left": queue}, priority=3)
        connection.SimpleQueue(other).put({"kept": True})
        servers.purge_queue({"REDIS_URL": settings.REDIS_URL})
        # kombu keeps a queue's priorities in lists named after it; none is left.
        keys = Redis.from_url(settings.REDIS_URL, decode_responses=True).scan_iter()
        left = [str(key) for key in keys]
        assert not [key for key in left if key.split("\x06")[0] in queues]
        kept = connection.SimpleQueue(other)
        assert kept.get(timeout=1).payload == {"kept": True}
        channel: Any = connection.default_channel  # kombu's virtual channel
        channel.queue_delete(other)


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Celery worker process on the test Redis; its name."""
    env = live_env()  # this xdist worker's Redis database
    name = f"test-{os.getpid()}"
    worker = servers.celery_worker(
        env, Path(tmp_path_factory.mktemp("celery")), name=name, beat=False, pool="solo"
    )
    with servers.running(worker):
        yield f"{name}@localhost"


def test_a_real_worker_answers_over_redis(worker: str) -> None:
    replies: list[dict[str, Any]] | None = []

    def answered() -> bool:
        nonlocal replies
        replies = app.control.ping(destination=[worker], timeout=1.0)
        return bool(replies)

    wait_for(answered, 60, f"the worker {worker} to answer a ping")
    assert replies == [{worker: {"ok": "pong"}}]


def test_the_worker_tries_a_lost_broker_again_within_a_second(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """kombu's own waits (2, 4, 6 ... s) let a Redis that was back wait seconds for polls."""
    assert app.conf.worker_consumer == "portal.worker_consumer:Consumer"
    consumer = Consumer.__new__(Consumer)  # only what reconnecting reads
    consumer.app, consumer.first_connection_attempt = app, False
    retries = app.conf.broker_connection_max_retries
    app.conf.broker_connection_max_retries = 4
    try:
        with pytest.raises(OperationalError):  # nothing listens on port 1
            consumer.ensure_connected(app.connection_for_read("redis://127.0.0.1:1/0"))
    finally:
        app.conf.broker_connection_max_retries = retries
    waits = [
        r.getMessage().split("Trying again ")[1]
        for r in caplog.records
        if "Trying" in r.getMessage()
    ]
    assert [w.split("...")[0] for w in waits] == ["now", "now", "in 1.00 second", "in 1.00 second"]


@pytest.mark.parametrize("ours", [False, True])
def test_closing_a_connection_that_lost_its_transport_does_not_end_the_worker(ours: bool) -> None:
    """Celery's close after a lost Redis, as in tests/chaos/test_redis_restart.py: the
    channel puts an unacked message back through a transport that kombu has dropped."""

    assert app.conf.broker_transport == "portal.broker:Transport"
    redis_server = ThrowawayRedis()
    try:
        connection = Connection(
            redis_server.url, transport=app.conf.broker_transport if ours else None
        )
        channel: Any = connection.default_channel  # kombu's virtual channel
        channel.queue_declare("q")
        channel.basic_publish(channel.prepare_message("poll"), exchange="", routing_key="q")
        assert channel.basic_get("q", no_ack=False) is not None  # delivered, not acked
        connection._do_close_transport()  # what kombu leaves once the broker is gone
        if ours:
            ignore_errors(connection, connection.close)
        else:  # kombu's own transport: the error Celery calls unrecoverable
            with pytest.raises(AttributeError, match="hostname"):
                ignore_errors(connection, connection.close)
    finally:
        redis_server.kill()


@pytest.mark.parametrize("ours", [False, True])
def test_a_task_ending_after_its_connection_closed_does_not_end_the_worker(ours: bool) -> None:
    """A task acked late on the channel of a connection Celery closed when Redis went away."""
    redis_server = ThrowawayRedis()
    try:
        transport = app.conf.broker_transport if ours else None
        connection = Connection(redis_server.url, transport=transport)
        channel: Any = connection.default_channel  # kombu's virtual channel
        channel.queue_declare("q")
        channel.basic_publish(channel.prepare_message("poll"), exchange="", routing_key="q")
        message = channel.basic_get("q", no_ack=False)
        ignore_errors(connection, connection.close)  # the channel has no connection now
        # and no pool, as the close leaves it when it had nothing to put back (this one put
        # the message back, which made the pool again).
        channel._pool = None
        errors = connection.connection_errors + connection.channel_errors
        if ours:  # a connection error, which kombu logs as a failed ack
            message.ack_log_error(logging.getLogger("test"), errors)
        else:
            with pytest.raises(AttributeError, match="client"):
                message.ack_log_error(logging.getLogger("test"), errors)
    finally:
        redis_server.kill()
