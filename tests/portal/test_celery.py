import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from portal.celery import app

ROOT = Path(__file__).resolve().parents[2]


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
def worker() -> Iterator[str]:
    """A real Celery worker process on the test Redis."""
    hostname = f"test-{os.getpid()}@localhost"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",
            "--pool=solo",
            "--without-gossip",
            "--without-mingle",
            "--loglevel=WARNING",
            "-n",
            hostname,
        ],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.test"},
    )
    try:
        yield hostname
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_real_worker_answers_over_redis(worker: str) -> None:
    deadline = time.monotonic() + 30
    replies: list[dict[str, Any]] | None = []
    while time.monotonic() < deadline and not replies:
        replies = app.control.ping(destination=[worker], timeout=1.0)
    assert replies == [{worker: {"ok": "pong"}}]
