"""Short leases in Redis, renewed while their holder lives: one poll per cluster (and part)
in flight, across all workers, and one submission per attempt.

A worker killed in the middle of a poll stops renewing, so its lease ends within
LEASE_SECONDS and the next beat's poll goes ahead on any worker; a live poll keeps
its lease however long it takes. (A 60 s lock held one cluster's polling for a
minute after its worker died.) A submission whose sbatch waits on a controller that
is down keeps its attempt's lease, so the reconciler's second task for the attempt
waits instead of submitting it a second time beside the first.
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


def submit_lease_key(attempt_id: int) -> str:
    return f"portal:submit:{attempt_id}"


@contextmanager
def poll_lease(client: redis.Redis, cluster_id: int, part: str = "") -> Iterator[bool]:
    """Hold the lease of the cluster's polls (of one part) while inside; False when another
    poll holds it."""
    with lease(client, lease_key(cluster_id, part)) as held:
        yield held


@contextmanager
def lease(client: redis.Redis, key: str) -> Iterator[bool]:
    """Hold the lease `key` while inside; yields False when someone else holds it."""
    # Not thread-local: the renewing thread extends the token the holder's thread took.
    held = client.lock(key, timeout=LEASE_SECONDS, blocking=False, thread_local=False)
    if not held.acquire(blocking=False):
        yield False
        return
    done = threading.Event()
    renewer = threading.Thread(
        target=_renew, args=(held, done, key), name=f"lease-{key}", daemon=True
    )
    renewer.start()
    try:
        yield True
    finally:
        done.set()
        renewer.join()
        try:
            held.release()
        except LockError:
            logger.warning("lease %s ended before its holder did", key)


def _renew(held: redis.lock.Lock, done: threading.Event, key: str) -> None:
    while not done.wait(RENEW_SECONDS):
        try:
            held.extend(LEASE_SECONDS, replace_ttl=True)
        except LockError:  # expired and perhaps taken: another holder may run beside this one
            logger.warning("lease %s lost while held", key)
            return
        except RedisError as exc:  # Redis away for a moment: the next renewal may reach it
            logger.warning("lease %s not renewed: %s", key, exc)
