"""Parsing one attempt's new lines within a time budget, in the parser's own process.

`parse_within` sends the lines to `monitoring.parse_worker` and waits at most the
budget; past it the process is killed (a regular expression cannot be
interrupted any other way) and a fresh one is started for the next attempt.
"""

import json
import logging
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.conf import settings

logger = logging.getLogger(__name__)

STARTUP_TIMEOUT = 30.0  # seconds for a fresh parser process to import and say it is ready
ROOT = Path(__file__).resolve().parent.parent


class ParseTimeout(Exception):
    """The lines took longer than the budget."""


class ParseFailed(Exception):
    """The parser process failed on the lines (or died)."""


def parse_budget() -> float:
    """Seconds of parsing one attempt gets per poll (settings.INGEST_PARSE_BUDGET)."""
    return float(getattr(settings, "INGEST_PARSE_BUDGET", 1.0))


@dataclass
class _Process:
    popen: "subprocess.Popen[bytes]"
    stdin: IO[bytes]
    stdout: IO[bytes]
    pid_of_parent: int


def _read_exactly(stream: IO[bytes], size: int, deadline: float) -> bytes:
    data = bytearray()
    fd = stream.fileno()
    while len(data) < size:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise ParseTimeout
        piece = os.read(fd, size - len(data))
        if not piece:
            raise ParseFailed("the parser process exited")
        data += piece
    return bytes(data)


class ParserProcess:
    """One parser process per poller process, started on first use and after a kill."""

    def __init__(self) -> None:
        self._process: _Process | None = None

    def _start(self) -> _Process:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        popen = subprocess.Popen(
            [sys.executable, "-m", "monitoring.parse_worker"],
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
            self._frame(process, time.monotonic() + STARTUP_TIMEOUT)
        except (ParseTimeout, ParseFailed):
            self.stop()
            raise ParseFailed("the parser process did not start") from None
        return process

    def _frame(self, process: _Process, deadline: float) -> dict[str, Any]:
        header = _read_exactly(process.stdout, 8, deadline)
        body = _read_exactly(process.stdout, int.from_bytes(header, "big"), deadline)
        reply: dict[str, Any] = json.loads(body)
        return reply

    def parse(self, request: dict[str, Any], budget: float) -> dict[str, Any]:
        """The parser's reply; raises ParseTimeout past the budget, ParseFailed on an error."""
        process = self._process
        # A process inherited through a fork belongs to the parent: start our own.
        if process is None or process.pid_of_parent != os.getpid() or process.popen.poll():
            process = self._start()
        body = json.dumps(request).encode()
        try:
            process.stdin.write(len(body).to_bytes(8, "big") + body)
            process.stdin.flush()
            reply = self._frame(process, time.monotonic() + budget)
        except (ParseTimeout, ParseFailed, OSError) as exc:
            self.stop()
            if isinstance(exc, ParseTimeout):
                raise
            raise ParseFailed(str(exc) or type(exc).__name__) from exc
        if "error" in reply:
            raise ParseFailed(reply["error"])
        return reply

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.pid_of_parent != os.getpid():
            return
        process.popen.kill()
        process.popen.wait()
        process.stdin.close()
        process.stdout.close()


parser_process = ParserProcess()


def parse_within(request: dict[str, Any], budget: float | None = None) -> dict[str, Any]:
    return parser_process.parse(request, parse_budget() if budget is None else budget)
