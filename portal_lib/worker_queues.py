"""Which Celery queues live workers consume, so that work goes where someone takes it.

Each worker writes its queues to one Redis hash every HEARTBEAT_SECONDS, with a
deadline HEARTBEAT_TTL ahead by Redis's own clock (workers and beat may run on
machines whose clocks differ). A worker that dies stops writing: its queues count
as unserved once the deadline passes, and work meant for them goes to the default
queue, which every worker also consumes. So a cluster's polls go to the worker that
sits next to the cluster (`celery worker -Q cluster.<name>,celery`) while it lives,
and to any other within seconds of its death.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from contextlib import suppress

import redis
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

REGISTRY = "portal:worker-queues"
HEARTBEAT_SECONDS = 1.0
HEARTBEAT_TTL = 5.0


# Polls of clusters without a worker of their own: a queue apart from the default one,
# which every worker started without -Q also consumes (settings.CELERY_TASK_QUEUES), so
# that a burst of a thousand submissions queued on the default one does not hold the
# polls (and the logs) back for minutes: workers take their queues in turn.
POLLS_QUEUE = "polls"
DEFAULT_QUEUE = "celery"
# Work that waits on what a tenant runs or names (its session's server, its alert's
# webhook, its job's processes): a queue apart, taken by a worker of its own
# (`celery worker -Q tenants`), so that a tenant whose server answers slowly holds that
# worker only, never the polls or anyone's submission. No worker takes it by default.
TENANTS_QUEUE = "tenants"


def poll_queue(cluster_name: str, served: set[str]) -> str:
    """Where a cluster's poll goes: the worker next to the cluster while one lives, else
    the polls queue while a worker takes it, else the default queue (every worker's)."""
    own = cluster_queue(cluster_name)
    if own in served:
        return own
    return polls_queue(served)


def polls_queue(served: set[str]) -> str:
    """The polls queue while a worker takes it, else the default queue (every worker's)."""
    return POLLS_QUEUE if POLLS_QUEUE in served else DEFAULT_QUEUE


def tenants_queue(served: set[str]) -> str:
    """The tenants' queue while a worker takes it, else the default queue (every worker's)."""
    return TENANTS_QUEUE if TENANTS_QUEUE in served else DEFAULT_QUEUE


def cluster_queue(cluster_name: str) -> str:
    """The queue a worker next to this cluster consumes (cluster names are slugs)."""
    return f"cluster.{cluster_name}"


def _now(client: redis.Redis) -> float:
    seconds, micros = client.time()
    return float(seconds) + micros / 1e6


def advertise(client: redis.Redis, worker: str, queues: Iterable[str]) -> None:
    deadline = _now(client) + HEARTBEAT_TTL
    client.hset(REGISTRY, worker, f"{deadline:.3f} {','.join(sorted(queues))}")


def withdraw(client: redis.Redis, worker: str) -> None:
    client.hdel(REGISTRY, worker)


def served_queues(client: redis.Redis) -> set[str]:
    """The queues some live worker consumes; the entries of dead workers are removed."""
    entries: dict[bytes, bytes] = client.hgetall(REGISTRY)  # type: ignore[assignment]
    if not entries:
        return set()
    now = _now(client)
    served: set[str] = set()
    stale: list[bytes] = []
    for worker, value in entries.items():
        deadline, _, queues = value.decode().partition(" ")
        try:
            alive = float(deadline) >= now
        except ValueError:
            alive = False
        if alive:
            served.update(q for q in queues.split(",") if q)
        else:
            stale.append(worker)
    if stale:
        client.hdel(REGISTRY, *stale)
    return served


class Heartbeat:
    """A worker's heartbeat: a thread that advertises its queues until stopped."""

    def __init__(self, client: redis.Redis, worker: str, queues: Iterable[str]) -> None:
        self.client = client
        self.worker = worker
        self.queues = sorted(queues)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="queue-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                advertise(self.client, self.worker, self.queues)
            except RedisError as exc:  # the broker is down too: nothing is routed meanwhile
                logger.warning("queue heartbeat of %s not written: %s", self.worker, exc)
            if self._stop.wait(HEARTBEAT_SECONDS):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=HEARTBEAT_SECONDS * 2)
        with suppress(RedisError):  # else its deadline passes on its own
            withdraw(self.client, self.worker)
