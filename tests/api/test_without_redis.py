"""The token API with Redis gone: throttling counts locally, submissions are whole or refused.

Each test starts its own redis-server on a free port, points the cache and the Celery
broker at it, and kills it (SIGKILL) where the test says.
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from celery import current_app
from django.test import Client

from jobs.enums import State
from jobs.models import Attempt, Job
from jobs.services import attempts_reconcile
from portal_lib import queueing
from tests.helpers import Tokens, bearer
from tests.throwaway import ThrowawayRedis, use_broker

pytestmark = pytest.mark.usefixtures("service_account")

SPEC = {
    "project": "vision",
    "cluster": "alps",
    "name": "no-redis",
    "command": "python train.py",
    "partition": "gpu",
    "cpus_per_task": 1,
    "time_limit": "00:30:00",
}


@pytest.fixture
def own_redis(settings: Any) -> Iterator[ThrowawayRedis]:
    """A redis-server of the test's own as the cache and the broker; killed at the end."""
    server = ThrowawayRedis()
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": server.url,
        }
    }
    broker = current_app.conf.broker_url
    use_broker(server.url)
    try:
        yield server
    finally:
        server.kill()
        use_broker(broker)


def _submit(client: Client) -> Any:
    return client.post("/api/v1/jobs/", json.dumps(SPEC), content_type="application/json")


def test_with_redis_up_a_submission_is_recorded_and_queued(
    cluster, own_redis: ThrowawayRedis, tokens: Tokens, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = _submit(bearer(tokens.member))
    assert response.status_code == 201, response.content
    assert Job.objects.filter(pk=response.json()["id"], state=State.QUEUED).exists()
    assert own_redis.client.llen("celery") == 1  # the submission's message, in the broker


def test_with_redis_killed_reads_answer_and_the_rate_still_holds(
    cluster, own_redis: ThrowawayRedis, tokens: Tokens, settings: Any
) -> None:
    client = bearer(tokens.member)
    assert client.get("/api/v1/jobs/").status_code == 200
    own_redis.kill()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": "3/min"},
    }
    codes = [client.get("/api/v1/jobs/").status_code for _ in range(4)]
    # Counted in this process while the shared count is out of reach: 3 a minute, no 500.
    assert codes == [200, 200, 200, 429]


def test_with_redis_killed_a_submission_is_refused_and_nothing_recorded(
    cluster, own_redis: ThrowawayRedis, tokens: Tokens, django_capture_on_commit_callbacks
) -> None:
    own_redis.kill()
    with django_capture_on_commit_callbacks(execute=True):
        response = _submit(bearer(tokens.member))
    assert response.status_code == 503, response.content
    assert "task queue is unreachable" in response.json()["detail"]
    assert "not recorded" in response.json()["detail"]
    assert not Job.objects.exists() and not Attempt.objects.exists()


def test_redis_lost_after_the_check_leaves_a_whole_job_for_the_reconciler(
    cluster,
    own_redis: ThrowawayRedis,
    tokens: Tokens,
    django_capture_on_commit_callbacks,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> None:
    """Redis dies between the check and the commit: the caller hears success, never an
    error about a job that exists; the reconciler sends the submission once Redis is back."""
    real_check = queueing.queue_check

    def check_then_lose_redis(what: str) -> None:
        real_check(what)
        own_redis.kill()

    monkeypatch.setattr("jobs.services.queue_check", check_then_lose_redis)
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    with django_capture_on_commit_callbacks(execute=True):
        response = _submit(bearer(tokens.member))
    assert response.status_code == 201, response.content
    attempt = Attempt.objects.get(job_id=response.json()["id"])
    assert attempt.state == State.QUEUED

    revived = ThrowawayRedis()  # Redis back (on its own port): the reconciler re-sends
    try:
        use_broker(revived.url)
        settings.SUBMIT_STUCK_AFTER = 0
        with django_capture_on_commit_callbacks(execute=True):
            assert attempts_reconcile() == 1
        message = json.loads(revived.client.lpop("celery"))  # type: ignore[arg-type]
        assert message["headers"]["task"] == "jobs.tasks.submit_attempt"
        assert message["headers"]["argsrepr"] == f"({attempt.pk},)"
    finally:
        revived.kill()
