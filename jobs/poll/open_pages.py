"""Which jobs have a page open: a lease per job WebSocket, read by the polls in one command.

A delta sent to a job's channel group costs Redis round trips even when nobody listens
(channels-redis reads the group's members first): with a thousand running jobs and a few
pages open, nearly all of a poll's sends went nowhere. Each open socket holds a member
`<job>:<channel>` of one sorted set, scored by when its lease ends; it renews the lease
at every heartbeat and gives it back when it closes, and a socket whose end went unnoticed
drops out when its lease runs out. A poll reads the set once and sends to those jobs only.

Nothing is lost by the order: a socket joins its job's group, then takes its lease, then
reads the job's state for its hello; a poll reads the leases after its commit. A poll that
found no lease committed before the socket read the state, so the hello (and the REST
reads it leads to) holds what the delta would have brought.
"""

import logging
import time
from typing import cast

import redis
from django.conf import settings

from portal_lib.health import redis_for

logger = logging.getLogger(__name__)

# Longer than a stream slot's lease (monitoring.live.slots, renewed at the same
# heartbeat): a socket whose slot lapsed is closed before its page lease can lapse.
PAGE_LEASE_SECONDS = 60.0
_KEY = "portal:pages:open"


def _redis() -> redis.Redis:
    return redis_for(settings.REDIS_URL)


def _member(job_id: int, channel: str) -> str:
    return f"{job_id}:{channel}"


def page_open(*, job_id: int, channel: str) -> None:
    """Take (or renew) the lease of a socket following the job; lapsed leases are dropped."""
    now = time.time()
    pipe = _redis().pipeline(transaction=False)
    pipe.zremrangebyscore(_KEY, "-inf", now)
    pipe.zadd(_KEY, {_member(job_id, channel): now + PAGE_LEASE_SECONDS})
    pipe.execute()


page_renew = page_open


def page_close(*, job_id: int, channel: str) -> None:
    """Give the lease back; one that cannot be given back runs out by itself."""
    try:
        _redis().zrem(_KEY, _member(job_id, channel))
    except redis.RedisError:
        logger.warning("page lease of job %s not given back (it lapses)", job_id, exc_info=True)


def jobs_watched() -> set[int] | None:
    """The jobs that have a page open now; None when Redis cannot say (send to every job)."""
    try:
        members = cast(list[bytes], _redis().zrangebyscore(_KEY, time.time(), "+inf"))
    except redis.RedisError:
        logger.warning("open pages unknown: sending every job's deltas", exc_info=True)
        return None
    return {int(member.split(b":", 1)[0]) for member in members}
