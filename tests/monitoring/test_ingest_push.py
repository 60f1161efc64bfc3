"""What a poll stored reaches the WebSocket group of each polled job with a page open, once;
a job nobody follows gets no send."""

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import User

from clusters.models import Cluster
from jobs.poll import open_pages
from jobs.poll.open_pages import jobs_watched, page_close, page_open
from jobs.poll.push import push_deltas
from jobs.rundir import METRICS_FILE, STDOUT_FILE, job_group
from projects.models import Project
from tests import factories
from tests.security.ingest_helpers import ingest, reply_with, running

MARK = {"type": "test.mark"}


@pytest.fixture
def no_open_pages() -> Iterator[None]:
    """No page lease of an earlier test (job ids come again after a flush)."""
    open_pages._redis().delete(open_pages._KEY)
    yield
    open_pages._redis().delete(open_pages._KEY)


def _listen(job_ids: list[int]) -> list[str]:
    layer = get_channel_layer()

    async def listen() -> list[str]:
        channels = [await layer.new_channel() for _ in job_ids]
        for job_id, channel in zip(job_ids, channels, strict=True):
            await layer.group_add(job_group(job_id), channel)
        return channels

    return async_to_sync(listen)()


def _first_messages(job_ids: list[int], channels: list[str]) -> list[dict[str, Any]]:
    """Each channel's first message, after a mark sent to every group: the mark itself
    where the poll sent nothing."""
    layer = get_channel_layer()

    async def receive() -> list[dict[str, Any]]:
        for job_id in job_ids:
            await layer.group_send(job_group(job_id), MARK)
        return [await layer.receive(channel) for channel in channels]

    return async_to_sync(receive)()


def test_every_watched_job_gets_its_own_delta_and_the_others_no_send(
    project: Project,
    owner: User,
    cluster: Cluster,
    django_capture_on_commit_callbacks: Any,
    no_open_pages: None,
) -> None:
    attempts = [running(factories.job(project, owner, cluster)[1]) for _ in range(40)]
    job_ids = [a.job_id for a in attempts]
    channels = _listen(job_ids)
    watched = attempts[::2]
    for attempt, channel in zip(attempts, channels, strict=True):
        if attempt in watched:
            page_open(job_id=attempt.job_id, channel=channel)
    assert jobs_watched() == {a.job_id for a in watched}
    writes = {
        a: {STDOUT_FILE: b"job %d\n" % a.job_id, METRICS_FILE: b'{"step": 1, "loss": 0.5}\n'}
        for a in attempts
    }
    with django_capture_on_commit_callbacks(execute=True):
        ingest(attempts, reply_with(writes))

    for attempt, first in zip(attempts, _first_messages(job_ids, channels), strict=True):
        if attempt not in watched:
            assert first == MARK
            continue
        assert first["job"] == attempt.job_id
        assert first["log"]["text"] == f"job {attempt.job_id}\n"
        assert first["series"] == {"loss": [[1.0, 0.5]]}


def test_a_closed_or_lapsed_page_gets_no_more_deltas(
    project: Project, owner: User, cluster: Cluster, no_open_pages: None
) -> None:
    jobs = [factories.job(project, owner, cluster)[0] for _ in range(3)]
    job_ids = [j.pk for j in jobs]
    channels = _listen(job_ids)
    open_now, closed, lapsed = zip(job_ids, channels, strict=True)
    page_open(job_id=open_now[0], channel=open_now[1])
    page_open(job_id=closed[0], channel=closed[1])
    page_close(job_id=closed[0], channel=closed[1])
    open_pages._redis().zadd(open_pages._KEY, {f"{lapsed[0]}:{lapsed[1]}": 1.0})  # long gone

    push_deltas(
        [{"type": "job.delta", "job": j, "attempt": 1, "state": "RUNNING"} for j in job_ids]
    )

    first = _first_messages(job_ids, channels)
    assert first[0]["state"] == "RUNNING"
    assert first[1:] == [MARK, MARK]


def test_every_job_gets_its_delta_when_the_open_pages_cannot_be_read(
    project: Project, owner: User, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = [factories.job(project, owner, cluster)[0] for _ in range(2)]
    job_ids = [j.pk for j in jobs]
    channels = _listen(job_ids)

    class Down:
        def zrangebyscore(self, *args: Any) -> None:
            raise redis.ConnectionError("Redis is down")

    monkeypatch.setattr(open_pages, "_redis", Down)
    assert jobs_watched() is None

    push_deltas(
        [{"type": "job.delta", "job": j, "attempt": 1, "state": "RUNNING"} for j in job_ids]
    )

    assert [m.get("state") for m in _first_messages(job_ids, channels)] == ["RUNNING"] * 2
