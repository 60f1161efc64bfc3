"""Each rank's progress from what the job wrote: its heartbeat record, its rank-labelled log.

Both are the job's own bytes: parsed in bounded time (a capped read, one JSON
object of at most HEARTBEAT_READ bytes, a capped scan of new log bytes) and
checked field by field; whatever is malformed is ignored, never raised. A job
that lies here can only mislead the portal about itself.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from monitoring.hangs.rules import RankProgress

HEARTBEAT_READ = 1024  # bytes read per rank record (portal_metrics writes 512)
MAX_STEP = 2**62
MAX_TEXT = 64
MAX_PAUSED = 366 * 86400.0  # seconds of declared pauses a record may claim
LOG_SCAN_BYTES = 256 * 1024  # of each poll's new stdout bytes, the newest
MAX_LOG_RANKS = 4096
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# `[rank3]: ...` (torchrun --tee / torch's own prefix), `3: ...` (srun --label).
_RANK_PREFIX = re.compile(rb"^(?:\[rank(\d{1,6})\]:|(\d{1,6}): )")
# `step 10`, `step: 10`, `step=10`, `Step 10/100`: a word, at most 3 separators, digits.
_STEP = re.compile(rb"\bstep[ :=]{0,3}(\d{1,12})\b", re.IGNORECASE)
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")  # as monitoring.reading.prefixes, on bytes
_MAX_LINE = 4096  # a longer line is searched in its first this many bytes


def _time(value: Any, now: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return min(float(value), now)  # a time in the future would hide a hang: it is now


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    if not math.isfinite(value) or value <= 0:
        return 0.0
    return min(float(value), MAX_PAUSED)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    return "".join(c for c in value[:MAX_TEXT] if c.isprintable())


def parse_heartbeat(data: bytes, *, rank: int, now: float) -> RankProgress | None:
    """The record portal_metrics.heartbeat wrote for `rank`; None if absent, torn or foreign."""
    if not data or len(data) > HEARTBEAT_READ:
        return None
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or record.get("rank") != rank:
        return None
    step = record.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        step = None
    node = record.get("node")
    return RankProgress(
        rank=rank,
        node=node if isinstance(node, str) and _NODE.match(node) else "",
        step=step,
        step_at=_time(record.get("step_time"), now) if step is not None else None,
        alive_at=_time(record.get("alive"), now),
        pause=_text(record.get("pause")),
        pause_since=_time(record.get("pause_since"), now),
        resumed_at=_time(record.get("resumed"), now),
        paused=_seconds(record.get("paused")),
    )


def log_rank_steps(data: bytes) -> dict[int, int]:
    """The highest step each rank-labelled line of these new log bytes names."""
    if len(data) > LOG_SCAN_BYTES:
        data = data[-LOG_SCAN_BYTES:]
        data = data[data.find(b"\n") + 1 :]  # from the first whole line
    end = data.rfind(b"\n")
    steps: dict[int, int] = {}
    for line in data[: end + 1].split(b"\n"):
        head = _RANK_PREFIX.match(line)
        if head is None:
            continue
        text = line[head.end() : _MAX_LINE]
        found = _STEP.search(_ANSI.sub(b"", text) if b"\x1b" in text else text)
        if found is None:
            continue
        rank, step = int(head.group(1) or head.group(2)), int(found.group(1))
        if rank in steps or len(steps) < MAX_LOG_RANKS:
            steps[rank] = max(step, steps.get(rank, -1))
    return steps


def progress_json(r: RankProgress, source: str) -> dict[str, Any]:
    """How a rank's progress is kept in AttemptProgress.ranks."""
    return {
        "node": r.node,
        "step": r.step,
        "step_at": r.step_at,
        "alive_at": r.alive_at,
        "pause": r.pause,
        "pause_since": r.pause_since,
        "resumed_at": r.resumed_at,
        "paused": r.paused,
        "source": source,
    }


def progress_from_json(rank: str, item: dict[str, Any]) -> RankProgress:
    return RankProgress(
        rank=int(rank),
        node=item.get("node") or "",
        step=item.get("step"),
        step_at=item.get("step_at"),
        alive_at=item.get("alive_at"),
        pause=item.get("pause") or "",
        pause_since=item.get("pause_since"),
        resumed_at=item.get("resumed_at"),
        paused=_seconds(item.get("paused")),
    )
