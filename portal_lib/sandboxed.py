"""A program run on untrusted input in a child process, under CPU, memory, file and time limits.

Some stdlib parsers cost time no caller can interrupt (a regular expression holds the
GIL for as long as it runs); in a child, the work costs that child alone and is killed
at its limits. The limits are set on the child (`prlimit`) before it is given its input.
"""

import contextlib
import os
import resource
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What one run may use: CPU seconds, address space, bytes written to files, wall time."""

    cpu_seconds: int
    memory_bytes: int
    wall_seconds: float
    file_bytes: int = 0
    open_files: int = 64

    def words(self) -> str:
        return (
            f"{self.wall_seconds:g} s, {self.cpu_seconds} s of CPU and "
            f"{self.memory_bytes // (1024 * 1024)} MiB of memory"
        )


@dataclass(frozen=True)
class Outcome:
    """How a run ended: its exit status (negative: the signal that ended it) and output."""

    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool

    @property
    def past_limits(self) -> bool:
        """Killed for its wall time, CPU time (SIGXCPU, then SIGKILL), or a file size."""
        ended_by = {-signal.SIGKILL, -signal.SIGXCPU, -signal.SIGXFSZ}
        return self.timed_out or self.returncode in ended_by


def _limit(pid: int, limits: Limits) -> None:
    for which, value in (
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_AS, limits.memory_bytes),
        (resource.RLIMIT_FSIZE, limits.file_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
    ):
        # Past the soft CPU limit comes SIGXCPU, a second later SIGKILL.
        hard = value + 1 if which == resource.RLIMIT_CPU else value
        resource.prlimit(pid, which, (value, hard))


def run_limited(
    argv: Sequence[str], *, stdin: bytes, limits: Limits, env: dict[str, str] | None = None
) -> Outcome:
    """Run `argv` with `stdin` as its input under `limits`; killed at the wall time."""
    process = subprocess.Popen(  # noqa: S603 - the caller's fixed argv, no shell
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env if env is not None else {"PATH": os.defpath},
        start_new_session=True,
    )
    try:
        with contextlib.suppress(ProcessLookupError):  # ended already: its status says why
            _limit(process.pid, limits)
        stdout, stderr = process.communicate(stdin, timeout=limits.wall_seconds)
        timed_out = False
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        timed_out = True
    finally:
        if process.poll() is None:  # interrupted on our side: the child goes too
            process.kill()
            process.wait()
    return Outcome(process.returncode, stdout, stderr, timed_out)
