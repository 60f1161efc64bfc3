"""Log training metrics for the portal: `from portal_metrics import log; log(step=10, loss=0.5)`.

`log_params(lr=3e-4, optimizer="adamw")` records the run's settings once (numbers,
booleans, short text): the portal adds them to the run's parameter table.

Also `heartbeat(step)` once per step on every rank and `with pause("checkpoint"):`
around declared pauses, so that the portal sees each rank's progress and tells a
hang from a long checkpoint (see the section at the end).

The portal copies this file into each run directory and sets PORTAL_METRICS_FILE.
Each call appends one JSON line {"step": ..., <metrics>, "time": <unix seconds>}
with a single write() on an O_APPEND descriptor, so lines from concurrent
writers do not interleave on a local file system (NFS gives no such promise).

Only rank 0 writes by default (RANK, else SLURM_PROCID, else 0). It never raises
into the training loop: the first failure is reported once on stderr, later ones
are silent. Standard library only; runs on Python 3.8 and later.
"""

from __future__ import annotations

import faulthandler
import json
import math
import operator
import os
import signal
import sys
import threading
import time
from typing import Any

MAX_LINE_BYTES = 64 * 1024  # the portal's line cap; a longer line would be cut and lost

_warned = False


def _warn_once(message: str) -> None:
    global _warned
    if _warned:
        return
    _warned = True
    try:
        sys.stderr.write(f"portal_metrics: {message}; further problems are not reported\n")
        sys.stderr.flush()
    except Exception:  # noqa: S110 - stderr itself may be gone; nothing left to tell
        pass


def _rank() -> int:
    for variable in ("RANK", "SLURM_PROCID"):
        value = os.environ.get(variable, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                _warn_once(f"{variable}={value!r} is not a number; treating this process as rank 0")
                return 0
    return 0


def _record(step: Any, metrics: dict[str, Any]) -> dict[str, Any] | None:
    try:
        record: dict[str, Any] = {"step": operator.index(step)}
    except TypeError:
        _warn_once(f"step must be an integer, got {step!r}; the line was not written")
        return None
    for name, raw in metrics.items():
        try:
            value = float(raw)  # also numpy scalars and one-element tensors
        except (TypeError, ValueError):
            _warn_once(f"{name}={raw!r} is not a number; it was left out")
            continue
        # Strict JSON has no NaN/Infinity; null keeps the key visible in the file.
        record[name] = value if math.isfinite(value) else None
    record["time"] = time.time()
    return record


def _append(line: bytes) -> bool:
    """One write() of one line on an O_APPEND descriptor; False (warned once) if not whole."""
    path = os.environ.get("PORTAL_METRICS_FILE", "")
    if len(line) > MAX_LINE_BYTES:
        _warn_once(f"a line of {len(line)} bytes is too long for the portal; not written")
        return False
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o644)
    try:
        written = os.write(fd, line)
    finally:
        os.close(fd)
    if written != len(line):
        _warn_once(f"only {written} of {len(line)} bytes reached {path}")
        return False
    return True


def _param(value: Any) -> Any:
    if isinstance(value, (bool, int, str)):
        return value
    try:
        number = float(value)  # numpy scalars, one-element tensors
    except (TypeError, ValueError):
        return str(value)
    return number if math.isfinite(number) else str(number)


def log_params(params: Any = None, **more: Any) -> bool:
    """Record the run's settings, e.g. `log_params(lr=3e-4)` or `log_params(vars(args))`.

    Appends {"params": {...}, "time": ...} to $PORTAL_METRICS_FILE (rank 0 only).
    Values that are not numbers, booleans or text are recorded as their text.
    """
    try:
        if not os.environ.get("PORTAL_METRICS_FILE", "") or _rank() != 0:
            return False
        values = {**dict(params or {}), **more}
        record = {"params": {str(k): _param(v) for k, v in values.items()}, "time": time.time()}
        line = json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
        return _append(line.encode())
    except Exception as exc:  # never into the training loop
        _warn_once(
            f"could not write parameters to {os.environ.get('PORTAL_METRICS_FILE')!r}: {exc}"
        )
        return False


def log(step: Any = None, all_ranks: bool = False, **metrics: Any) -> bool:
    """Append {"step", **metrics, "time"} to $PORTAL_METRICS_FILE; True if a line was written.

    Does nothing off rank 0 (unless all_ranks) or when PORTAL_METRICS_FILE is unset.
    """
    try:
        path = os.environ.get("PORTAL_METRICS_FILE", "")
        if not path or (_rank() != 0 and not all_ranks):
            return False
        record = _record(step, metrics)
        if record is None:
            return False
        line = (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode()
        return _append(line)
    except Exception as exc:  # never into the training loop
        _warn_once(f"could not write metrics to {os.environ.get('PORTAL_METRICS_FILE')!r}: {exc}")
        return False


# --- progress per rank: heartbeat, declared pauses, stack dumps ------------------------------
#
# Each rank keeps one fixed-size record, `$PORTAL_PROGRESS_DIR/rank-<R>.json`, rewritten in
# place with one pwrite() (no rename, no growth): the portal reads a few hundred bytes per
# rank per poll. A daemon thread rewrites it every TICK_SECONDS with a fresh "alive" time,
# so a rank blocked in a collective still ticks while one that is stopped (SIGSTOP, a hung
# kernel call holding the GIL) does not: that is how the portal names the rank that
# stopped first.

HEARTBEAT_BYTES = 512  # the record's size on disk (space-padded JSON and a newline)
TICK_SECONDS = 1.0
_MAX_TEXT = 64  # node and pause names are cut to this many characters


class _Progress:
    def __init__(self) -> None:
        self.fd: int | None = None
        self.disabled = False
        self.step: int | None = None
        self.step_time: float | None = None
        self.pause: str | None = None
        self.pause_since: float | None = None
        self.pause_depth = 0
        self.resumed: float | None = None  # when the last declared pause ended
        self.paused = 0.0  # seconds spent in declared pauses that have ended
        self.written = 0.0  # time.monotonic() of the last write
        self.rank = 0
        self.node = ""


_progress = _Progress()


def _node() -> str:
    name = os.environ.get("SLURMD_NODENAME", "")
    if not name:
        try:
            name = os.uname().nodename.split(".")[0]
        except Exception:
            name = ""
    return name[:_MAX_TEXT]


def _after_fork() -> None:
    # A forked DataLoader worker is not the rank: only the process that opened it writes.
    _progress.disabled = True


def _open_progress() -> bool:
    directory = os.environ.get("PORTAL_PROGRESS_DIR", "")
    if not directory or _progress.disabled:
        return False
    os.makedirs(directory, exist_ok=True)
    _progress.rank, _progress.node = _rank(), _node()
    path = os.path.join(directory, f"rank-{_progress.rank}.json")
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    _progress.fd = os.open(path, flags, 0o644)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork)
    threading.Thread(target=_tick, name="portal-heartbeat", daemon=True).start()
    return True


def _write_progress() -> None:
    p = _progress
    if p.fd is None or p.disabled:
        return
    record = {
        "v": 1,
        "rank": p.rank,
        "node": p.node,
        "pid": os.getpid(),
        "step": p.step,
        "step_time": p.step_time,
        "alive": time.time(),
        "pause": p.pause,
        "pause_since": p.pause_since,
        "resumed": p.resumed,
        "paused": round(p.paused, 3),
    }
    body = json.dumps(record, separators=(",", ":")).encode()[: HEARTBEAT_BYTES - 1]
    os.pwrite(p.fd, body.ljust(HEARTBEAT_BYTES - 1) + b"\n", 0)
    p.written = time.monotonic()


def _tick() -> None:
    while True:
        time.sleep(TICK_SECONDS)
        try:
            _write_progress()
        except Exception as exc:
            _warn_once(f"could not write the heartbeat: {exc}")
            return


def heartbeat(step: Any) -> bool:
    """Record that this rank finished `step` (cheap: call it every step); True if recorded.

    Does nothing when PORTAL_PROGRESS_DIR is unset (outside the portal).
    """
    try:
        p = _progress
        p.step, p.step_time = operator.index(step), time.time()
        if p.fd is None and not _open_progress():
            return False
        # The ticker writes every second anyway; write here too when it is due.
        if time.monotonic() - p.written >= TICK_SECONDS / 2:
            _write_progress()
        return True
    except Exception as exc:  # never into the training loop
        _warn_once(f"could not record step {step!r}: {exc}")
        return False


class pause:  # used like a function: `with pause("checkpoint"):`
    """Declare a pause (checkpointing, evaluation): the portal does not call it a hang."""

    def __init__(self, name: str = "checkpoint") -> None:
        self.name = str(name)[:_MAX_TEXT]

    def __enter__(self) -> pause:
        try:
            p = _progress
            p.pause_depth += 1
            if p.pause_depth == 1:
                p.pause, p.pause_since = self.name, time.time()
                if p.fd is not None or _open_progress():
                    _write_progress()
        except Exception as exc:
            _warn_once(f"could not declare the pause {self.name!r}: {exc}")
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            p = _progress
            p.pause_depth = max(p.pause_depth - 1, 0)
            if p.pause_depth == 0:
                now = time.time()
                if p.pause_since is not None:
                    p.paused += max(now - p.pause_since, 0.0)
                p.pause, p.pause_since, p.resumed = None, None, now
                _write_progress()
        except Exception as exc:
            _warn_once(f"could not end the pause {self.name!r}: {exc}")


_stack_files: list[Any] = []  # kept open: faulthandler writes to them from a signal handler


def _stack_rank() -> int | None:
    """The rank a process dumps its stacks as; None for a launcher (torchrun itself)."""
    if os.environ.get("RANK", "").strip():
        return _rank()
    if os.environ.get("PORTAL_LAUNCHER"):
        return None
    return _rank() if os.environ.get("SLURM_PROCID", "").strip() else None


def install_stack_dump() -> bool:
    """On the portal's signal, dump every thread's stack to $PORTAL_STACKS_DIR/rank-<R>.txt.

    The batch script's sitecustomize calls it in every Python process of the job.
    """
    try:
        directory = os.environ.get("PORTAL_STACKS_DIR", "")
        name = os.environ.get("PORTAL_STACK_SIGNAL", "USR2")
        rank = _stack_rank()
        if not directory or rank is None or not hasattr(signal, f"SIG{name}"):
            return False
        signum = getattr(signal, f"SIG{name}")
        os.makedirs(directory, exist_ok=True)
        handle = open(os.path.join(directory, f"rank-{rank}.txt"), "a")  # noqa: SIM115
        handle.write(f"# rank {rank} pid {os.getpid()} node {_node()}\n")
        handle.flush()
        faulthandler.register(signum, file=handle, all_threads=True)
        _stack_files.append(handle)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=lambda: _ignore_in_child(signum))
        return True
    except Exception as exc:
        _warn_once(f"could not install the stack dump: {exc}")
        return False


def _ignore_in_child(signum: int) -> None:
    # A forked worker would write into its rank's file: it ignores the signal instead.
    try:
        faulthandler.unregister(signum)
        signal.signal(signum, signal.SIG_IGN)
    except Exception:  # noqa: S110 - not the main thread: the default stays
        pass
