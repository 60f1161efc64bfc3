"""Metric points from what a training job writes: the bytes of stdout.log and metrics.jsonl.

Everything here is pure: lines in (`monitoring.reading.lines` splits the bytes), points out.
User patterns are checked by `jobs.patterns` before they are ever compiled.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from monitoring.reading.reader import MetricReader, ReaderState
from monitoring.reading.user_patterns import user_metrics, user_patterns
from portal_lib.fast_json import loads

MAX_NAME_LENGTH = 100
_MAX_PROVISIONAL = 64 * 1024


@dataclass(frozen=True)
class MetricPoint:
    name: str
    step: int
    value: float
    time: float | None = None  # unix seconds, when the source says


# --- Numbers and names ---------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _number(value: object) -> float | None:
    """A float from a JSON/Python number or numeric text (nan and ±inf included); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an int beyond float range
            return None
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _finite(value: object) -> float | None:
    """A finite float, for metrics.jsonl: strict JSON carries no nan, and its writer
    (`portal_metrics`) leaves them out."""
    number = _number(value)
    return number if number is not None and math.isfinite(number) else None


def _user_metrics(pattern: Any, line: str) -> tuple[int | None, dict[str, float]]:
    return user_metrics(pattern, line, _number)


# --- Points --------------------------------------------------------------------------------


def parse_stdout_metrics(
    lines: Iterable[str],
    *,
    extra_patterns: Sequence[str] = (),
    last_step: int | None = None,
    state: dict[str, Any] | None = None,
    provisional: str = "",
    final: bool = True,
) -> list[MetricPoint]:
    """Metric points in stdout lines (wall time None: the caller knows when it read them).

    A value printed as nan or ±inf (a diverged loss) is a point with that float value.

    The general reader (`monitoring.reading.reader`) does the reading; see
    tests/corpus/README.md for what it reads. Lines without a step attach to the
    latest step; before any step, each is the next of a running count from
    `last_step` (-1 when None), and only a line naming a loss counts.

    `state` is the reader's state between calls (a JSON-able dict, updated in
    place). `provisional` is the newest finished `\\r` redraw of the unfinished last
    line (`monitoring.reading.lines.read_chunk`): read as a point now, and not again when the
    same text later ends the line or comes first in the next call.

    `final` False: more of the file may come, so a block of `key = value` lines that has
    not ended, and a record written over a cleared bar whose refresh has not come yet
    (`monitoring.reading.reader`), are kept in `state` until they do.

    `extra_patterns` (`monitoring.reading.user_patterns`, on RE2) that fail validate_pattern
    are skipped; a valid one adds to (and for the same name overrides) the defaults,
    on the first 4 KiB of a line.
    """
    users = user_patterns(tuple(extra_patterns))
    reader = MetricReader(ReaderState.from_json(state), last_step=last_step)
    seen = state.get("provisional", "") if state is not None else ""
    for raw in lines:
        if seen and raw == seen:
            seen = ""  # read already, when it was still being written
            continue
        seen = ""
        _feed(reader, raw, users)
    if provisional and provisional != seen:
        _feed(reader, provisional, users)
    points = [
        MetricPoint(name, point.step, float(value))
        for point in reader.finish(more_to_come=not final)
        for name, value in point.values.items()
    ]
    if state is not None:
        state.clear()
        state.update(reader.state.to_json())
        if provisional:
            state["provisional"] = provisional[:_MAX_PROVISIONAL]
    return points


def _feed(reader: MetricReader, raw: str, users: list[Any]) -> None:
    user_step: int | None = None
    user_values: dict[str, float] = {}
    if users:
        line = _ANSI.sub("", raw.replace("\0", ""))
        for pattern in users:
            found_step, found = _user_metrics(pattern, line)
            user_step = found_step if found_step is not None else user_step
            user_values.update(found)
    reader.feed(raw.replace("\0", ""), user_step=user_step, user_values=user_values)


def parse_metrics_jsonl(
    lines: Iterable[str], params: dict[str, object] | None = None
) -> tuple[list[MetricPoint], int]:
    """Points from metrics.jsonl lines, and how many non-blank lines were skipped as bad.

    A line is one JSON object with an integer `step` >= 0; each other finite
    number is a metric, and `time` (unix seconds) is the points' wall time, not
    a metric. Strings, booleans, nested values and non-finite numbers are
    ignored without making the line bad. A line {"params": {...}} without a step
    (`portal_metrics.log_params`) adds its entries to `params`, later ones winning,
    when a dict is given; it is never bad.
    """
    points: list[MetricPoint] = []
    bad = 0
    for line in lines:
        record = jsonl_record(line, params)
        if record is None:
            bad += 1
        elif record:
            step, time, values = record
            points += [MetricPoint(name, step, value, time) for name, value in values]
    return points, bad


JsonlRecord = tuple[int, float | None, list[tuple[str, float]]]  # step, time, (name, value)s


def jsonl_record(
    line: str, params: dict[str, object] | None = None
) -> JsonlRecord | tuple[()] | None:
    """One metrics.jsonl line (`parse_metrics_jsonl`): its step, time and metrics in the
    line's order; () for a blank or settings line, None for a bad one."""
    text = line.replace("\0", "").strip()
    if not text:
        return ()
    try:
        record = loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError, too many digits, nesting
        return None
    if not isinstance(record, dict):
        return None
    logged = record.get("params")
    if isinstance(logged, dict) and "step" not in record:
        if params is not None:
            params.update(logged)
        return ()
    step = record.get("step")
    if isinstance(step, float) and step.is_integer():
        step = int(step)
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        return None
    values = []
    for name, raw in record.items():
        # A float, the usual value, is checked here (x - x is 0 for a finite x only).
        value = (raw if raw - raw == 0 else None) if type(raw) is float else _finite(raw)
        if value is not None and name not in ("step", "time") and len(name) <= MAX_NAME_LENGTH:
            values.append((name, value))
    return step, _finite(record.get("time")), values
