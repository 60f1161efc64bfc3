"""The poll lease with real Celery workers: a live poll keeps it, a killed one loses it fast.

The polled cluster's SSH port accepts connections and never answers, so each poll
hangs in its SSH handshakes (one per account) for as long as the test needs a poll
in flight. Its workers take tasks from a queue of their own, so no other worker of
the suite competes for them.
"""

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User

from devtools import servers
from devtools.servers import Server, wait_until
from jobs.enums import State
from jobs.models import Attempt
from jobs.poll.lease import LEASE_SECONDS, lease_key
from jobs.tasks import poll_cluster
from projects.models import Project
from tests import factories
from tests.fixtures.servers import live_env
from tests.helpers import worker_tag

pytestmark = pytest.mark.django_db(transaction=True)

# Ten times the lease and well under the old lock's 60 s: a dead holder is seen as dead.
TAKEN_OVER_WITHIN = 10 * LEASE_SECONDS
ACCOUNTS = 4  # a poll hangs ~10 s in each account's SSH handshake


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never says a word (no SSH banner)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield listener.getsockname()[1]


@pytest.fixture
def cluster_id(silent_port: int, project: Project, member: User) -> int:
    cluster = factories.cluster("hangs", ssh_host="127.0.0.1", ssh_port=silent_port)
    for number in range(ACCOUNTS):
        user = User.objects.create_user(f"lease-{number}")
        _, attempt = factories.job(project, member, cluster)
        Attempt.objects.filter(pk=attempt.pk).update(
            account=factories.account(cluster, user),
            state=State.RUNNING,
            slurm_job_id=str(100 + number),
            run_dir=f"/runs/{attempt.uuid}",
        )
    return cluster.pk


@pytest.fixture
def queue() -> Iterator[str]:
    name = f"poll-lease-{worker_tag()}"
    yield name
    redis.Redis.from_url(settings.REDIS_URL).delete(name)


def _worker(name: str, queue: str, workdir: Path) -> Server:
    worker = servers.celery_worker(
        live_env(), workdir, name=f"{name}-{worker_tag()}", beat=False, concurrency=1, queues=queue
    )
    worker.ready = lambda: "ready." in worker.log_tail(200)
    return worker


def test_a_worker_killed_mid_poll_loses_the_lease_within_seconds(
    cluster_id: int, queue: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(settings.REDIS_URL)
    first, second = _worker("lease-a", queue, tmp_path), _worker("lease-b", queue, tmp_path)
    with servers.running(first):
        poll_cluster.apply_async((cluster_id,), queue=queue)
        wait_until(lambda: client.get(lease_key(cluster_id)) is not None, 60, "the first poll")
        holder = client.get(lease_key(cluster_id))
        # A poll longer than its lease keeps it: renewed, never taken over.
        time.sleep(3 * LEASE_SECONDS)
        assert client.get(lease_key(cluster_id)) == holder
        assert 0 < client.pttl(lease_key(cluster_id)) <= LEASE_SECONDS * 1000
        with servers.running(second):
            first.kill()
            killed = time.monotonic()

            def taken_over() -> bool:
                poll_cluster.apply_async((cluster_id,), queue=queue)  # as the beat would
                now = client.get(lease_key(cluster_id))
                return now is not None and now != holder

            wait_until(taken_over, 120, "the second worker to take the poll", interval=0.5)
            assert time.monotonic() - killed < TAKEN_OVER_WITHIN, first.log_tail()
