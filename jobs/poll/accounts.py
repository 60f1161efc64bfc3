"""A poll's agent calls, one per cluster account, in parallel and each within its own budget.

Each call starts in its tenant's login shell, whose start-up files the tenant writes: a
`sleep 25` in one ~/.bashrc held every account's logs when the accounts were read one
after another. Now at most `ACCOUNT_WORKERS` calls run at once, each ends at its budget
(`read_budget`) or its output cap, and an account whose call ran out of either, or was
slow, is left out of the next polls (`jobs.poll.backoff`) while a probe in the
background times its bare start-up. Only the SSH calls run in threads: requests are
built and replies handled (the database) by the poll's own thread, as each call ends.
"""

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from clusters.agent import AgentReply, AgentRequest
from clusters.models import ClusterAccount
from clusters.selectors import account_endpoint
from clusters.ssh import CommandTimedOut, Endpoint, OutputCapExceeded, SSHError
from jobs.models import Attempt
from jobs.poll.backoff import (
    Delay,
    delay_clear,
    delay_note,
    delay_reopen,
    delays_read,
    probe_claim,
    probe_release,
)

logger = logging.getLogger(__name__)

ACCOUNT_WORKERS = 8
# Seconds an account's call may take beyond its commands' own timeouts: its login, the
# agent's start and its reads. Past it the call is stopped.
READ_BUDGET = 10.0
# A call that took longer than this (less its commands' own run time) leaves its account
# out of the next polls, as one that ran out of its budget does; the poll waits no
# longer for it and goes on, the call ending (within its budget) in the background.
SLOW_READ = 5.0
PROBE_WORKERS = 4
MIB = 1024 * 1024

# The agent call for an account: its endpoint, the request and the seconds it may take.
Ask = Callable[[Endpoint, AgentRequest, float], AgentReply]
Group = tuple[ClusterAccount, list[Attempt]]


def read_budget(request: AgentRequest) -> float:
    return sum(c.timeout for c in request.commands) + READ_BUDGET


def read_patience(request: AgentRequest) -> float:
    """How long a poll waits for a call: its commands' timeouts and SLOW_READ."""
    return sum(c.timeout for c in request.commands) + SLOW_READ


class ReadLeftRunning(CommandTimedOut):
    """A call the poll stopped waiting for; it ends in the background and is not read."""


@dataclass(frozen=True)
class AccountRead:
    account: ClusterAccount
    attempts: list[Attempt]
    endpoint: Endpoint
    request: AgentRequest


@dataclass(frozen=True)
class ReadOutcome:
    """An account's call as it ended: a reply, or what it raised."""

    read: AccountRead
    reply: AgentReply | None
    error: Exception | None
    seconds: float


@dataclass(frozen=True)
class Roster:
    """A poll's accounts: those it reads and those it leaves out, with their notes."""

    due: list[Group]
    left_out: list[tuple[ClusterAccount, Delay]]
    noted: frozenset[int]  # accounts read now that still carry a note


def accounts_roster(groups: Sequence[Group], ask: Ask, *, now: float | None = None) -> Roster:
    """Leave out the accounts with a note; start a probe of those whose wait is over."""
    now = time.time() if now is None else now
    delays = delays_read([account.pk for account, _ in groups])
    due, left_out = [], []
    for account, attempts in groups:
        delay = delays.get(account.pk)
        if delay is None or not delay.skipped:
            due.append((account, attempts))
            continue
        left_out.append((account, delay))
        if delay.probe_due(now):
            _probe_start(account, ask)
    return Roster(due=due, left_out=left_out, noted=frozenset(delays))


def read_accounts(
    reads: Sequence[AccountRead], ask: Ask, *, noted: frozenset[int] = frozenset()
) -> Iterator[ReadOutcome]:
    """Each account's call in a bounded pool; outcomes in the order the calls end.

    Each outcome is judged first: an account that ran out of time or output, or was
    slow, is noted (left out of the next polls); a quick one loses its note. A call
    past its `read_patience` is not waited for: its outcome is a ReadLeftRunning (the
    account noted) and the call ends within its budget in the background, unread, so
    one tenant's slow shell start-up holds no poll past SLOW_READ.
    """
    if not reads:
        return
    executor = ThreadPoolExecutor(
        max_workers=min(ACCOUNT_WORKERS, len(reads)), thread_name_prefix="poll-account"
    )
    started = time.monotonic()
    try:
        futures = {executor.submit(_timed, ask, read): read for read in reads}
        pending = set(futures)
        quick: list[int] = []
        while pending:
            until = min(started + read_patience(futures[f].request) for f in pending)
            done, pending = wait(
                pending, timeout=max(0.0, until - time.monotonic()), return_when=FIRST_COMPLETED
            )
            for future in done:
                outcome = future.result()
                pk = outcome.read.account.pk
                if _judge(outcome) is None and pk in noted:
                    quick.append(pk)
                yield outcome
            now = time.monotonic()
            late = [f for f in pending if now >= started + read_patience(futures[f].request)]
            for future in late:
                pending.discard(future)
                yield _left_running(futures[future], now - started)
        delay_clear(quick)
    finally:
        executor.shutdown(wait=False)


def _left_running(read: AccountRead, seconds: float) -> ReadOutcome:
    patience = read_patience(read.request)
    error = ReadLeftRunning(
        f"the read of {read.account.username} was still running after {patience:.0f} s; "
        "it ends in the background, unread",
        timeout=patience,
    )
    outcome = ReadOutcome(read, None, error, seconds)
    _judge(outcome)
    return outcome


def _timed(ask: Ask, read: AccountRead) -> ReadOutcome:
    started = time.monotonic()
    try:
        reply = ask(read.endpoint, read.request, read_budget(read.request))
    except Exception as exc:  # handled by the poll's thread, with the account named
        return ReadOutcome(read, None, exc, time.monotonic() - started)
    return ReadOutcome(read, reply, None, time.monotonic() - started)


def _judge(outcome: ReadOutcome) -> Delay | None:
    """Note the account when its call ran out of time or output, or was slow."""
    pk = outcome.read.account.pk
    error = outcome.error
    if isinstance(error, CommandTimedOut):
        return delay_note(pk, f"its read did not finish within {error.timeout:g} s")
    if isinstance(error, OutputCapExceeded):
        return delay_note(pk, f"it sent more than {error.cap / MIB:.0f} MiB, which is cut")
    # Its commands (a user's squeue) may take their timeouts: the controller's time, not the
    # account's. (Not the times the reply gives: a login shell can print any reply.)
    allowed = SLOW_READ + sum(c.timeout for c in outcome.read.request.commands)
    if outcome.reply is not None and outcome.seconds > allowed:
        return delay_note(pk, f"its last read took {outcome.seconds:.0f} s")
    return None


class _Probes:
    """A few threads of this process that time bare agent starts of left-out accounts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._pid = os.getpid()

    def submit(self, probe: Callable[[], None]) -> Future[None]:
        with self._lock:
            if self._executor is None or self._pid != os.getpid():
                # A forked worker child has none of its parent's threads.
                self._executor = ThreadPoolExecutor(
                    max_workers=PROBE_WORKERS, thread_name_prefix="poll-probe"
                )
                self._pid = os.getpid()
            return self._executor.submit(probe)


_probes = _Probes()


def _probe_start(account: ClusterAccount, ask: Ask) -> None:
    if not probe_claim(account.pk, READ_BUDGET + 30):
        return  # another worker probes it
    endpoint = account_endpoint(account=account)
    _probes.submit(lambda: account_probe(account.pk, endpoint, ask))


def account_probe(account_id: int, endpoint: Endpoint, ask: Ask) -> None:
    """Time a bare start of the account's agent (no files): its login and shell start-up.

    Quick: the polls read the account again. Slow, out of time or output: it waits
    twice as long.
    """
    started = time.monotonic()
    try:
        ask(endpoint, AgentRequest(), READ_BUDGET)
    except CommandTimedOut:
        delay_note(account_id, f"its shell start-up did not finish within {READ_BUDGET:.0f} s")
        return
    except OutputCapExceeded as exc:
        delay_note(account_id, f"its shell start-up printed more than {exc.cap / MIB:.0f} MiB")
        return
    except SSHError as exc:  # not the tenant's start-up: tried again at the next poll
        logger.info("probe of account %s failed: %s", account_id, exc)
        return
    finally:
        probe_release(account_id)
    seconds = time.monotonic() - started
    if seconds > SLOW_READ:
        delay_note(account_id, f"its shell start-up took {seconds:.0f} s")
    else:
        delay_reopen(account_id)
