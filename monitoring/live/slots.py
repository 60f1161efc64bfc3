"""Leased stream slots: how many live streams (SSE, WebSocket) one user holds open.

A slot is a member of a Redis sorted set scored by the time its lease ends. The
stream renews it at every heartbeat and gives it back when it ends; a stream
whose end went unnoticed (a reset connection, a killed process) loses its slot
when the lease runs out, within SLOT_LEASE_SECONDS rather than never. Redis, not
the Django cache: every web process must count the same slots, atomically.

Each slot is also a member (`<user>:<slot>`) of one set per kind, with the same
lease, so that `/metrics` counts the live streams of everyone in one command.
"""

import functools
import secrets
import time

import redis
from django.conf import settings

# The kinds of stream, one set of slots each: notebooks' server-sent events, pages' WebSockets.
SSE = "sse"
WEBSOCKET = "ws"

# Three heartbeats (15 s each): one lost renewal does not end a healthy stream.
SLOT_LEASE_SECONDS = 45.0

# KEYS: the user's set, the kind's set. ARGV: now, lease end, cap, slot, the slot in the
# kind's set. Drops lapsed leases first.
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
local ttl = math.ceil(ARGV[2] - ARGV[1]) + 1
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[5])
redis.call('EXPIRE', KEYS[2], ttl)
return 1
"""
# ARGV: now, lease end, slot, the slot in the kind's set. A lapsed lease is not renewed:
# its stream must end.
_RENEW = """
local ends = redis.call('ZSCORE', KEYS[1], ARGV[3])
if not ends or tonumber(ends) <= tonumber(ARGV[1]) then return 0 end
local ttl = math.ceil(ARGV[2] - ARGV[1]) + 1
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[2], ttl)
return 1
"""


@functools.cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5)


def _redis() -> redis.Redis:
    return _client(settings.REDIS_URL)


def _key(kind: str, user_id: int) -> str:
    return f"streams:{kind}:{user_id}"


def _all_key(kind: str) -> str:
    return f"streams:{kind}:all"


def _member(user_id: int, slot: str) -> str:
    return f"{user_id}:{slot}"


def slot_take(*, kind: str, user_id: int, cap: int) -> str | None:
    """A new slot of `kind` ("sse", "ws") for the user, or None when `cap` are held."""
    slot = secrets.token_hex(8)
    now = time.time()
    keys = (_key(kind, user_id), _all_key(kind))
    ends = now + SLOT_LEASE_SECONDS
    taken = _redis().eval(_TAKE, 2, *keys, now, ends, cap, slot, _member(user_id, slot))
    return slot if taken else None


def slot_renew(*, kind: str, user_id: int, slot: str) -> bool:
    """Extend the slot's lease; False when it already lapsed (the stream should end)."""
    now = time.time()
    keys = (_key(kind, user_id), _all_key(kind))
    ends = now + SLOT_LEASE_SECONDS
    renewed = _redis().eval(_RENEW, 2, *keys, now, ends, slot, _member(user_id, slot))
    return bool(renewed)


def slot_give_back(*, kind: str, user_id: int, slot: str) -> None:
    pipe = _redis().pipeline()
    pipe.zrem(_key(kind, user_id), slot)
    pipe.zrem(_all_key(kind), _member(user_id, slot))
    pipe.execute()


def slots_held(*, kind: str, user_id: int) -> int:
    """Slots whose lease still runs."""
    return int(_redis().zcount(_key(kind, user_id), time.time(), "+inf"))


def slots_live(*, kind: str) -> int:
    """Everyone's slots of `kind` whose lease still runs: the live streams."""
    return int(_redis().zcount(_all_key(kind), time.time(), "+inf"))


def slots_clear(*, kind: str, user_id: int) -> None:
    """Forget every slot of the user (tests, and an admin freeing a user by hand)."""
    client = _redis()
    slots = client.zrange(_key(kind, user_id), 0, -1)
    members = [_member(user_id, s.decode() if isinstance(s, bytes) else str(s)) for s in slots]
    pipe = client.pipeline()
    pipe.delete(_key(kind, user_id))
    if members:
        pipe.zrem(_all_key(kind), *members)
    pipe.execute()
