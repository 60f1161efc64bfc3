"""Leased stream slots: how many live streams (SSE, WebSocket) one user holds open.

A slot is a member of a Redis sorted set scored by the time its lease ends. The
stream renews it at every heartbeat and gives it back when it ends; a stream
whose end went unnoticed (a reset connection, a killed process) loses its slot
when the lease runs out, within SLOT_LEASE_SECONDS rather than never. Redis, not
the Django cache: every web process must count the same slots, atomically.
"""

import functools
import secrets
import time

import redis
from django.conf import settings

# Three heartbeats (15 s each): one lost renewal does not end a healthy stream.
SLOT_LEASE_SECONDS = 45.0

# KEYS[1]: the user's set. ARGV: now, lease end, cap, slot. Drops lapsed leases first.
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(ARGV[2] - ARGV[1]) + 1)
return 1
"""
# ARGV: now, lease end, slot. A lapsed lease is not renewed: its stream must end.
_RENEW = """
local ends = redis.call('ZSCORE', KEYS[1], ARGV[3])
if not ends or tonumber(ends) <= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[1], math.ceil(ARGV[2] - ARGV[1]) + 1)
return 1
"""


@functools.cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5)


def _redis() -> redis.Redis:
    return _client(settings.REDIS_URL)


def _key(kind: str, user_id: int) -> str:
    return f"streams:{kind}:{user_id}"


def slot_take(*, kind: str, user_id: int, cap: int) -> str | None:
    """A new slot of `kind` ("sse", "ws") for the user, or None when `cap` are held."""
    slot = secrets.token_hex(8)
    now = time.time()
    taken = _redis().eval(_TAKE, 1, _key(kind, user_id), now, now + SLOT_LEASE_SECONDS, cap, slot)
    return slot if taken else None


def slot_renew(*, kind: str, user_id: int, slot: str) -> bool:
    """Extend the slot's lease; False when it already lapsed (the stream should end)."""
    now = time.time()
    renewed = _redis().eval(_RENEW, 1, _key(kind, user_id), now, now + SLOT_LEASE_SECONDS, slot)
    return bool(renewed)


def slot_give_back(*, kind: str, user_id: int, slot: str) -> None:
    _redis().zrem(_key(kind, user_id), slot)


def slots_held(*, kind: str, user_id: int) -> int:
    """Slots whose lease still runs."""
    return int(_redis().zcount(_key(kind, user_id), time.time(), "+inf"))


def slots_clear(*, kind: str, user_id: int) -> None:
    """Forget every slot of the user (tests, and an admin freeing a user by hand)."""
    _redis().delete(_key(kind, user_id))
