"""Log training metrics for the portal: `from portal_metrics import log; log(step=10, loss=0.5)`.

The portal copies this file into each run directory and sets PORTAL_METRICS_FILE.
Each call appends one JSON line {"step": ..., <metrics>, "time": <unix seconds>}
with a single write() on an O_APPEND descriptor, so lines from concurrent
writers do not interleave on a local file system (NFS gives no such promise).

Only rank 0 writes by default (RANK, else SLURM_PROCID, else 0). It never raises
into the training loop: the first failure is reported once on stderr, later ones
are silent. Standard library only; runs on Python 3.8 and later.
"""

from __future__ import annotations

import json
import math
import operator
import os
import sys
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
    except Exception as exc:  # never into the training loop
        _warn_once(f"could not write metrics to {os.environ.get('PORTAL_METRICS_FILE')!r}: {exc}")
        return False
