"""Parsing the attempts' new lines within a time budget each, in the parser's own process.

`parse_groups` sends a poll's requests to `monitoring.ingest.worker` in one frame (a
few for a large poll), grouped by attempt, and reads the replies as the worker
writes them, one per request. Each attempt's requests get the budget from the moment
the worker turns to them; past it the process is killed (a regular expression cannot
be interrupted any other way), the attempt's remaining requests time out, and a fresh
process takes the requests after them. One attempt's lines cost that attempt only.
"""

import logging
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.conf import settings

from portal_lib.fast_json import dumps, loads

logger = logging.getLogger(__name__)

STARTUP_TIMEOUT = 30.0  # seconds for a fresh parser process to import and say it is ready
ROOT = Path(__file__).resolve().parents[2]
# Requests per frame are cut at about this size, so the worker holds a bounded share of
# a poll's lines (each attempt's file reads are bounded already, their sum is not).
MAX_BATCH_BYTES = 8 * 1024 * 1024
_READ_BYTES = 1024 * 1024


class ParseTimeout(Exception):
    """The lines took longer than the budget."""


class ParseFailed(Exception):
    """The parser process failed on the lines (or died)."""


Request = dict[str, Any]
Reply = dict[str, Any]
Outcome = Reply | ParseTimeout | ParseFailed


def parse_budget() -> float:
    """Seconds of parsing one attempt gets per poll (settings.INGEST_PARSE_BUDGET)."""
    return float(getattr(settings, "INGEST_PARSE_BUDGET", 1.0))


@dataclass
class _Process:
    popen: "subprocess.Popen[bytes]"
    stdin: IO[bytes]
    stdout: IO[bytes]
    pid_of_parent: int
    buffer: bytearray = field(default_factory=bytearray)  # read, not yet taken as frames

    def frame(self, deadline: float) -> Reply:
        """The next reply frame; raises ParseTimeout past the deadline, ParseFailed at EOF.

        A frame already read in whole is taken whatever the time: the worker finished it.
        """
        fd = self.stdout.fileno()
        while True:
            if len(self.buffer) >= 8:
                size = int.from_bytes(self.buffer[:8], "big")
                if len(self.buffer) >= 8 + size:
                    body = bytes(self.buffer[8 : 8 + size])
                    del self.buffer[: 8 + size]
                    reply: Reply = loads(body)
                    return reply
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ParseTimeout
            piece = os.read(fd, _READ_BYTES)
            if not piece:
                raise ParseFailed("the parser process exited")
            self.buffer += piece


@dataclass
class _Turn:
    """A request's place in the poll: its attempt's group and its index there."""

    group: int
    index: int
    body: bytes


class ParserProcess:
    """One parser process per poller process, started on first use and after a kill."""

    def __init__(self) -> None:
        self._process: _Process | None = None

    def _start(self) -> _Process:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        popen = subprocess.Popen(
            [sys.executable, "-m", "monitoring.ingest.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            env=env,
        )
        if popen.stdin is None or popen.stdout is None:  # not with PIPE; for the type checker
            raise ParseFailed("the parser process has no pipes")
        process = _Process(popen, popen.stdin, popen.stdout, os.getpid())
        self._process = process
        try:
            process.frame(time.monotonic() + STARTUP_TIMEOUT)
        except (ParseTimeout, ParseFailed):
            self.stop()
            raise ParseFailed("the parser process did not start") from None
        return process

    def _running(self) -> _Process:
        process = self._process
        # A process inherited through a fork belongs to the parent: start our own.
        if process is None or process.pid_of_parent != os.getpid() or process.popen.poll():
            process = self._start()
        return process

    def parse(self, groups: list[list[Request]], budget: float) -> list[list[Outcome]]:
        """Each request's reply, or why it has none; each group parsed within `budget`."""
        outcomes: list[list[Outcome]] = [[ParseFailed("not parsed")] * len(g) for g in groups]
        turns = [
            _Turn(group, index, dumps(request))
            for group, requests in enumerate(groups)
            for index, request in enumerate(requests)
        ]
        started: dict[int, float] = {}  # when the worker turned to each group
        at = 0
        while at < len(turns):
            batch = _batch(turns, at)
            try:
                process = self._running()
                body = b"[" + b",".join(t.body for t in batch) + b"]"
                process.stdin.write(len(body).to_bytes(8, "big") + body)
                process.stdin.flush()
            except (ParseFailed, OSError) as exc:
                # No process to parse with: the first request waiting fails, as when
                # a request's own lines kill it; the next round starts a fresh one.
                self.stop()
                outcomes[turns[at].group][turns[at].index] = _failed(exc)
                at += 1
                continue
            at = self._replies(process, turns, at, at + len(batch), budget, started, outcomes)
        return outcomes

    def _replies(
        self,
        process: _Process,
        turns: list[_Turn],
        at: int,
        end: int,
        budget: float,
        started: dict[int, float],
        outcomes: list[list[Outcome]],
    ) -> int:
        """Read the replies of turns[at:end]; returns where the next frame must start."""
        turn_start = time.monotonic()
        while at < end:
            turn = turns[at]
            deadline = started.setdefault(turn.group, turn_start) + budget
            try:
                reply = process.frame(deadline)
            except ParseTimeout:
                self.stop()
                logger.info("parser process killed: request group %d over budget", turn.group)
                while at < len(turns) and turns[at].group == turn.group:
                    outcomes[turn.group][turns[at].index] = ParseTimeout()
                    at += 1
                return at
            except ParseFailed as exc:
                self.stop()
                outcomes[turn.group][turn.index] = exc
                return at + 1
            turn_start = time.monotonic()
            outcomes[turn.group][turn.index] = (
                ParseFailed(reply["error"]) if "error" in reply else reply
            )
            at += 1
        return at

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.pid_of_parent != os.getpid():
            return
        process.popen.kill()
        process.popen.wait()
        process.stdin.close()
        process.stdout.close()


def _batch(turns: list[_Turn], at: int) -> list[_Turn]:
    """The turns from `at` that go in one frame: at least one, about MAX_BATCH_BYTES."""
    size, end = 0, at
    while end < len(turns) and (end == at or size + len(turns[end].body) <= MAX_BATCH_BYTES):
        size += len(turns[end].body)
        end += 1
    return turns[at:end]


def _failed(exc: Exception) -> ParseFailed:
    return exc if isinstance(exc, ParseFailed) else ParseFailed(str(exc) or type(exc).__name__)


parser_process = ParserProcess()


def parse_groups(groups: list[list[Request]], budget: float | None = None) -> list[list[Outcome]]:
    """Parse a poll's requests, grouped by attempt, each group within the budget."""
    return parser_process.parse(groups, parse_budget() if budget is None else budget)


def parse_within(request: Request, budget: float | None = None) -> Reply:
    """One request's reply; raises ParseTimeout past the budget, ParseFailed on an error."""
    (outcome,) = parse_groups([[request]], budget)[0]
    if isinstance(outcome, ParseTimeout | ParseFailed):
        raise outcome
    return outcome
