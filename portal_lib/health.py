"""The portal's figures about itself (poll times, SSH errors, points stored), kept in Redis.

Every worker process adds to the same Redis hash, so `/metrics` reads one hash
whatever the number of processes. A figure is a counter (only ever added to) or a
last value (overwritten); both are plain floats. Losing Redis loses a figure, never
the work that was being counted: a write that fails is logged and dropped.
"""

import functools
import logging
from collections.abc import Mapping

import redis
from django.conf import settings

logger = logging.getLogger(__name__)

HEALTH_KEY = "portal:health"


@functools.cache
def redis_for(url: str) -> redis.Redis:
    """One client (and connection pool) per Redis URL and process."""
    return redis.Redis.from_url(url, socket_timeout=5)


def health_redis() -> redis.Redis:
    return redis_for(settings.REDIS_URL)


def health_record(
    *, add: Mapping[str, float] | None = None, last: Mapping[str, float] | None = None
) -> None:
    """Add to the counters in `add` and overwrite the values in `last`, in one round trip."""
    if not add and not last:
        return
    try:
        pipe = health_redis().pipeline(transaction=False)
        for name, amount in (add or {}).items():
            if amount:
                pipe.hincrbyfloat(HEALTH_KEY, name, amount)
        if last:
            pipe.hset(HEALTH_KEY, mapping={name: repr(float(v)) for name, v in last.items()})
        pipe.execute()
    except redis.RedisError:
        logger.warning("cannot record health figures %s", sorted({**(add or {}), **(last or {})}))


def health_read() -> dict[str, float]:
    """Every figure recorded so far (one HGETALL); fields that are not numbers are skipped."""
    figures: dict[str, float] = {}
    for name, value in health_redis().hgetall(HEALTH_KEY).items():
        try:
            figures[name.decode() if isinstance(name, bytes) else str(name)] = float(value)
        except (UnicodeDecodeError, ValueError):
            continue
    return figures
