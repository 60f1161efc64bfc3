"""Accounts whose reads the poll leaves out for a while: slow or flooding login shells.

A tenant's login shell runs before the agent (its ~/.bashrc, ~/.ssh/rc, a `command=` in
authorized_keys), so an account's read can take as long as its owner likes. An account
whose read ran past its budget, printed past its cap or was slow is noted here (in
Redis, so every worker knows) and left out of the polls until its time is up; then a
probe (`jobs.poll.accounts`) times a bare start of its agent, and a quick one lets the
polls read it again. Each note in a row doubles the wait. The account's jobs' pages say
why their monitoring is late (`account_delay`).
"""

import json
import logging
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import redis
from django.conf import settings

from portal_lib.health import redis_for

logger = logging.getLogger(__name__)

FIRST_WAIT = 30.0
LONGEST_WAIT = 600.0
# A note outlives its wait by this much, so that the next slow read counts as in a row.
KEPT_FOR = 2 * LONGEST_WAIT


def _redis() -> redis.Redis:
    return redis_for(settings.REDIS_URL)


def _key(account_id: int) -> str:
    return f"portal:poll:delay:{account_id}"


def _probe_key(account_id: int) -> str:
    return f"portal:poll:probe:{account_id}"


@dataclass(frozen=True)
class Delay:
    """Why an account's reads are late; `reopened`: a probe found it quick again."""

    why: str  # ends a sentence: "its shell start-up took 25 s"
    streak: int  # notes in a row
    until: float  # Unix time its next probe is due
    reopened: bool = False

    @property
    def retry_at(self) -> datetime:
        return datetime.fromtimestamp(self.until, tz=UTC)

    @property
    def skipped(self) -> bool:
        """Whether the polls leave the account out (until a probe reopens it)."""
        return not self.reopened

    def probe_due(self, now: float) -> bool:
        return self.skipped and now >= self.until


def wait_after(streak: int) -> float:
    """How long an account is left out after `streak` notes in a row."""
    return min(FIRST_WAIT * 2 ** min(streak - 1, 16), LONGEST_WAIT)


def _parse(raw: bytes | str | None) -> Delay | None:
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return Delay(
            why=str(data["why"]),
            streak=int(data["streak"]),
            until=float(data["until"]),
            reopened=bool(data["reopened"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


def _write(account_id: int, delay: Delay) -> None:
    _redis().set(_key(account_id), json.dumps(asdict(delay)), ex=int(KEPT_FOR))


def account_delay(*, account_id: int | None) -> Delay | None:
    """The account's note while the polls leave it out; None when it is read as usual
    (or Redis cannot say)."""
    if account_id is None:
        return None
    try:
        delay = _parse(_redis().get(_key(account_id)))
    except redis.RedisError:
        logger.warning("delay of account %s unknown", account_id, exc_info=True)
        return None
    return delay if delay is not None and delay.skipped else None


def delays_read(account_ids: list[int]) -> dict[int, Delay]:
    """The notes of these accounts, in one round trip; none when Redis cannot say."""
    if not account_ids:
        return {}
    try:
        raws = _redis().mget([_key(pk) for pk in account_ids])
    except redis.RedisError:
        logger.warning("account delays unknown: reading every account", exc_info=True)
        return {}
    found = {pk: _parse(raw) for pk, raw in zip(account_ids, raws, strict=True)}
    return {pk: delay for pk, delay in found.items() if delay is not None}


def delay_note(account_id: int, why: str, *, now: float | None = None) -> Delay:
    """Leave the account out: one more note in a row, a wait twice the last."""
    now = time.time() if now is None else now
    previous = delays_read([account_id]).get(account_id)
    streak = previous.streak + 1 if previous is not None else 1
    delay = Delay(why=why, streak=streak, until=now + wait_after(streak))
    try:
        _write(account_id, delay)
    except redis.RedisError:
        logger.warning("delay of account %s not kept: %s", account_id, why, exc_info=True)
    return delay


def delay_reopen(account_id: int) -> None:
    """A probe found the account quick: the polls read it again, the streak kept until a
    read of theirs is quick too."""
    delay = delays_read([account_id]).get(account_id)
    if delay is None:
        return
    try:
        _write(account_id, Delay(delay.why, delay.streak, delay.until, reopened=True))
    except redis.RedisError:
        logger.warning("account %s not reopened", account_id, exc_info=True)


def delay_clear(account_ids: list[int]) -> None:
    """These accounts' reads were quick: no note left."""
    if not account_ids:
        return
    try:
        _redis().delete(*[_key(pk) for pk in account_ids])
    except redis.RedisError:
        logger.warning("delays of accounts %s not cleared", account_ids, exc_info=True)


def probe_claim(account_id: int, seconds: float) -> bool:
    """Whether this caller probes the account now: one probe at a time, across workers."""
    try:
        return bool(_redis().set(_probe_key(account_id), b"1", nx=True, ex=max(1, int(seconds))))
    except redis.RedisError:
        return False


def probe_release(account_id: int) -> None:
    try:
        _redis().delete(_probe_key(account_id))
    except redis.RedisError:
        logger.warning("probe of account %s not released (it lapses)", account_id)
