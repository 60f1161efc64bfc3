"""A Celery worker (with beat) kept running by devtools/supervise.py, as `make run` runs it,
and the kill -9 that a crash or the out-of-memory killer gives it."""

import os
import signal
import sys
import time
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

from devtools import servers
from devtools.servers import Server
from tests.fixtures.sandbox import descendants
from tests.helpers import wait_for

# supervise's first pause before a restart, as in the Procfile.
RESTART_PAUSE = 1.0


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


class SupervisedWorker(Server):
    """`python -m devtools.supervise -- celery worker --beat ...` in a group of its own."""

    def __init__(self, env: Mapping[str, str], workdir: Path, name: str) -> None:
        worker = servers.celery_worker(env, workdir, name=name)
        command = [sys.executable, "-m", *worker.args]
        args = ["devtools.supervise", "--pause", str(RESTART_PAUSE), "--", *command]
        super().__init__(name, args, env, workdir, ready=lambda: self.readies() >= 1)

    def _text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def readies(self) -> int:
        """How many times a worker of this supervisor said it was ready."""
        return self._text().count(" ready.")

    def restarts(self) -> int:
        return self._text().count("supervise: ")

    def worker_pid(self) -> int | None:
        """The Celery worker's main process (supervise's child), if one runs."""
        if self.proc is None:
            return None
        found = children(self.proc.pid)
        return found[0] if found else None

    def kill_worker(self) -> int:
        """kill -9 of the worker, its pool and its beat, not of supervise; the worker's pid."""
        pid = self.worker_pid()
        assert pid is not None, f"no worker runs under supervise; log:\n{self.log_tail()}"
        for victim in [pid, *descendants(pid)]:
            with suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
        return pid

    def wait_replaced(self, old: int, timeout: float = 60) -> float:
        """Until supervise has started a new worker; when it did (monotonic)."""

        def replaced() -> bool:
            pid = self.worker_pid()
            return pid is not None and pid != old

        wait_for(replaced, timeout, f"supervise to start the worker again; log:\n{self.log_tail()}")
        return time.monotonic()
