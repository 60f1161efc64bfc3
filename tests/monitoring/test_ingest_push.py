"""What a poll stored reaches each polled job's WebSocket group through Redis, once."""

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import User

from clusters.models import Cluster
from jobs.rundir import METRICS_FILE, STDOUT_FILE, job_group
from projects.models import Project
from tests import factories
from tests.security.ingest_helpers import ingest, reply_with, running


def test_every_polled_job_gets_its_own_delta(
    project: Project, owner: User, cluster: Cluster, django_capture_on_commit_callbacks: Any
) -> None:
    attempts = [running(factories.job(project, owner, cluster)[1]) for _ in range(40)]
    layer = get_channel_layer()

    async def listen() -> list[str]:
        channels = [await layer.new_channel() for _ in attempts]
        for attempt, channel in zip(attempts, channels, strict=True):
            await layer.group_add(job_group(attempt.job_id), channel)
        return channels

    channels = async_to_sync(listen)()
    writes = {
        a: {STDOUT_FILE: b"job %d\n" % a.job_id, METRICS_FILE: b'{"step": 1, "loss": 0.5}\n'}
        for a in attempts
    }
    with django_capture_on_commit_callbacks(execute=True):
        ingest(attempts, reply_with(writes))

    async def receive() -> list[dict[str, Any]]:
        return [await layer.receive(channel) for channel in channels]

    for attempt, delta in zip(attempts, async_to_sync(receive)(), strict=True):
        assert delta["job"] == attempt.job_id
        assert delta["log"]["text"] == f"job {attempt.job_id}\n"
        assert delta["series"] == {"loss": [[1.0, 0.5]]}
