"""One poll per cluster in flight, across all workers: a short lease in Redis, renewed
while the poll runs.

A worker killed in the middle of a poll stops renewing, so its lease ends within
LEASE_SECONDS and the next beat's poll goes ahead on any worker; a live poll keeps
its lease however long it takes. (A 60 s lock held one cluster's polling for a
minute after its worker died.)
"""

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from redis.exceptions import LockError, RedisError

logger = logging.getLogger(__name__)

LEASE_SECONDS = 5.0
# Renewed this often: two renewals may fail (a busy Redis, a slow thread) before it ends.
RENEW_SECONDS = LEASE_SECONDS / 3


def lease_key(cluster_id: int, part: str = "") -> str:
    return f"portal:poll:{cluster_id}:{part}" if part else f"portal:poll:{cluster_id}"


@contextmanager
def poll_lease(client: redis.Redis, cluster_id: int, part: str = "") -> Iterator[bool]:
    """Hold the lease of the cluster's polls (of one part) while inside; False when another
    poll holds it."""
    # Not thread-local: the renewing thread extends the token the poll's thread took.
    lease = client.lock(
        lease_key(cluster_id, part), timeout=LEASE_SECONDS, blocking=False, thread_local=False
    )
    if not lease.acquire(blocking=False):
        yield False
        return
    done = threading.Event()
    renewer = threading.Thread(
        target=_renew, args=(lease, done, cluster_id), name=f"poll-lease-{cluster_id}", daemon=True
    )
    renewer.start()
    try:
        yield True
    finally:
        done.set()
        renewer.join()
        try:
            lease.release()
        except LockError:
            logger.warning("poll lease of cluster %s ended before the poll did", cluster_id)


def _renew(lease: redis.lock.Lock, done: threading.Event, cluster_id: int) -> None:
    while not done.wait(RENEW_SECONDS):
        try:
            lease.extend(LEASE_SECONDS, replace_ttl=True)
        except LockError:  # expired and perhaps taken: another poll may run beside this one
            logger.warning("poll lease of cluster %s lost while polling", cluster_id)
            return
        except RedisError as exc:  # Redis away for a moment: the next renewal may reach it
            logger.warning("poll lease of cluster %s not renewed: %s", cluster_id, exc)
