import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from devtools import servers
from portal.celery import app
from tests.fixtures.servers import live_env
from tests.helpers import wait_for


def test_celery_is_configured_for_at_least_once_json_tasks() -> None:
    conf = app.conf
    assert conf.broker_url == settings.REDIS_URL
    assert conf.task_serializer == "json"
    assert conf.accept_content == ["json"]
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert 0 < conf.task_soft_time_limit < conf.task_time_limit


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
    from kombu.exceptions import OperationalError

    from portal.worker_consumer import Consumer

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
