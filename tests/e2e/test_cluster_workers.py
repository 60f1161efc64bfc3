"""Two clusters, two workers, each next to its cluster: one dies, the other takes its polls.

Each worker consumes its cluster's queue (`cluster.<name>`) and the default one, and
advertises them (portal_lib.worker_queues); beat sends a cluster's polls to its queue
while a live worker advertises it, else to the default queue. Worker A is killed with
SIGKILL while both clusters run a job: A's polls pile up in its queue only until its
heartbeat's deadline passes, then worker B polls both, and nothing is lost.

Cluster A is the sandbox; cluster B is the second cluster (`clusters.sandbox.second`):
its own slurmctld, nodes b1 and b2, and login node (its own sshd port and host key, which
its row pins), so each job runs on its own cluster's nodes. The routing, the failover and
the separate clusters are real, the distance between them not.
"""

import contextlib
import shlex
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings

from clusters.sandbox.config import NODES, SECOND
from devtools import servers
from devtools.servers import Server
from jobs.enums import State
from jobs.models import Attempt
from jobs.services import job_submit
from monitoring.logs.store import log_read
from monitoring.models import LogFile
from portal_lib.worker_queues import HEARTBEAT_TTL, cluster_queue, served_queues
from tests.factories import spec
from tests.fixtures.servers import live_env
from tests.helpers import QUEUE_WAIT, Printer, wait_for, worker_tag

pytestmark = pytest.mark.sandbox


def _worker(name: str, queue: str, workdir: Path, *, beat: bool) -> Server:
    worker = servers.celery_worker(
        live_env(), workdir, name=f"{name}-{worker_tag()}", beat=beat, queues=f"{queue},celery"
    )
    worker.ready = lambda: "ready." in worker.log_tail(400)
    return worker


def _stored(attempt: Attempt) -> int:
    sizes = LogFile.objects.filter(attempt=attempt, name="stdout.log").values_list(
        "size", flat=True
    )
    return next(iter(sizes), 0)


def _grows(attempt: Attempt, timeout: float, what: str) -> float:
    """Wait until the stored log grows; the seconds it took."""
    start, size = time.monotonic(), _stored(attempt)
    wait_for(lambda: _stored(attempt) > size, timeout, what)
    return time.monotonic() - start


def test_the_other_worker_takes_a_dead_workers_cluster(
    researcher, project, sandbox_cluster, second_cluster, alice, tmp_path: Path
) -> None:
    second = second_cluster
    assert second.host_key != sandbox_cluster.host_key
    assert second.ssh_port != sandbox_cluster.ssh_port
    queue_a, queue_b = cluster_queue(sandbox_cluster.name), cluster_queue(second.name)
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(queue_a, queue_b)
    worker_a = _worker("near-a", queue_a, tmp_path, beat=False)
    worker_b = _worker("near-b", queue_b, tmp_path, beat=True)  # beat lives on
    jobs = {}
    printer = Printer.new()
    with servers.running(worker_a, worker_b), contextlib.ExitStack() as cleanup:
        cleanup.callback(printer.stop)
        wait_for(lambda: {queue_a, queue_b} <= served_queues(client), 60, "both heartbeats")
        for cluster in (sandbox_cluster, second):
            jobs[cluster.pk] = job_submit(
                user=researcher,
                project=project,
                cluster=cluster,
                spec=spec(command=printer.command),
            )
        attempt_a, attempt_b = (
            Attempt.objects.get(job=jobs[c.pk]) for c in (sandbox_cluster, second)
        )
        for attempt in (attempt_a, attempt_b):
            wait_for(lambda a=attempt: _stored(a) > 0, QUEUE_WAIT, "both jobs to run and print")
        worker_a.kill()
        killed = time.monotonic()
        # Until A's deadline passes, beat still sends A's polls to A's queue, where they wait.
        wait_for(lambda: client.llen(queue_a) > 0, 2 * HEARTBEAT_TTL + 30, "A's polls to queue up")
        wait_for(
            lambda: queue_a not in served_queues(client), 2 * HEARTBEAT_TTL + 30, "A's deadline"
        )
        _grows(attempt_a, 120, "worker B to poll cluster A")
        recovered = time.monotonic() - killed
        print(
            f"CHAOS worker next to a cluster killed: its cluster polled again after {recovered:.1f} s"
        )
        _grows(attempt_b, 60, "cluster B to go on being polled")
        printer.stop()
        for attempt in (attempt_a, attempt_b):
            wait_for(
                lambda a=attempt: Attempt.objects.filter(pk=a.pk, files_complete=True).exists(),
                QUEUE_WAIT,
                "the jobs to end and their logs to be read",
            )
    client.delete(queue_a, queue_b)
    for attempt, nodes in ((attempt_a, NODES), (attempt_b, SECOND.nodes)):
        attempt.refresh_from_db()
        assert attempt.state == State.COMPLETED
        assert attempt.node_list in nodes  # each job ran on its own cluster
        remote = alice.run(f"cat {shlex.quote(attempt.run_dir + '/stdout.log')}").stdout
        stored = log_read(attempt_id=attempt.pk, file="stdout.log", offset=0, limit=len(remote) + 1)
        assert stored.data == remote and Printer.whole(remote), remote[-200:]
