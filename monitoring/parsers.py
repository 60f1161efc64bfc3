"""Metric points from what a training job writes: the bytes of stdout.log and metrics.jsonl.

Everything here is pure: lines in (`monitoring.lines` splits the bytes), points out.
User patterns are checked by `jobs.patterns` before they are ever compiled.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from monitoring.user_patterns import user_metrics, user_pattern, user_patterns

# User patterns only ever see this much of a line: it bounds the cost of a pattern
# that backtracks polynomially, which the static check below does not catch.
MAX_USER_LINE_CHARS = 4096
MAX_NAME_LENGTH = 100
# A Hugging Face log dict is a few hundred characters; literal_eval sees no more.
MAX_DICT_CHARS = 4096


@dataclass(frozen=True)
class MetricPoint:
    name: str
    step: int
    value: float
    time: float | None = None  # unix seconds, when the source says


# --- Numbers and names ---------------------------------------------------------------------

_NUMBER = r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|(?:nan|inf(?:inity)?)\b)"
# key=value or key: value. The value must end the token: `1.2.3`, `12:30:01`, `1.5s`
# and `3GB` are not numbers here.
_PAIR = re.compile(
    rf"(?<![\w./-])([A-Za-z_][\w./-]{{0,{MAX_NAME_LENGTH - 1}}})\s*[=:]\s*({_NUMBER})(?![\w.:])",
    re.IGNORECASE,
)
_STEP = re.compile(
    r"\b(?:global[_ ]step|step|iter(?:ation)?)\b\s*[:=#]?\s*(\d{1,12})(?!\.?\d)", re.I
)
# tqdm's right bar `| 50/100 [00:05<00:05, 9.80it/s, loss=0.532]`; Lightning prefixes `Epoch 1:`.
_BAR = re.compile(r"\|\s*(\d{1,12})/(\d{1,12})\s*\[")
_BAR_EPOCH = re.compile(r"^\s*Epoch\s+(\d{1,9})\b")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# Step counters are the step, not metrics; v_num is Lightning's run version.
_NOT_METRICS = frozenset({"step", "global_step", "iter", "iteration", "v_num"})


def _finite(value: object) -> float | None:
    """A finite float from a JSON/Python number or numeric text; None otherwise.

    Non-finite values are dropped everywhere: a chart cannot draw them and strict
    JSON cannot carry them. A loss that went NaN shows as the series stopping.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an int beyond float range
            return None
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _is_loss(name: str) -> bool:
    return name.lower().endswith("loss")


def _pairs(line: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for match in _PAIR.finditer(line):
        name, value = match[1], _finite(match[2])
        if value is not None and name.lower() not in _NOT_METRICS:
            values[name] = value
    return values


def _python_dict(line: str) -> dict[str, float] | None:
    """Numeric items of a `{...}` dict literal on the line (Hugging Face Trainer), if any."""
    start, end = line.find("{"), line.rfind("}")
    if start < 0 or end <= start or end - start >= MAX_DICT_CHARS:
        return None
    text = line[start : end + 1]
    try:
        found = ast.literal_eval(text)  # literals only: never runs code
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        try:
            found = json.loads(text)  # true/false/null are not Python literals
        except (ValueError, RecursionError):
            return None
    if not isinstance(found, dict):
        return None
    values: dict[str, float] = {}
    for key, raw in found.items():
        value = _finite(raw)
        if isinstance(key, str) and 0 < len(key) <= MAX_NAME_LENGTH and value is not None:
            values[key] = value
    return values


def _default_metrics(line: str) -> tuple[int | None, dict[str, float]]:
    """(step, metrics) that the built-in patterns find on one line."""
    step_match = _STEP.search(line)
    step = int(step_match[1]) if step_match else None
    as_dict = _python_dict(line)
    if as_dict:
        dict_step = as_dict.pop("step", None)
        if dict_step is not None and dict_step.is_integer() and dict_step >= 0:
            return int(dict_step), as_dict
        if any(_is_loss(name) for name in as_dict):
            return step, as_dict
    values = _pairs(line)
    bar = _BAR.search(line) if step is None else None
    if bar:
        # Only the bar's postfix holds metrics: `Training: 100%` is its description.
        values = _pairs(line[bar.end() :])
        if values:
            done, total = int(bar[1]), int(bar[2])
            epoch = _BAR_EPOCH.match(line)
            step = int(epoch[1]) * total + done if epoch else done
    if step is None and not any(_is_loss(name) for name in values):
        # No step and no loss: configuration echoes, NCCL_* settings, torchrun noise.
        return None, {}
    return step, values


def _user_pattern(pattern: str) -> Any:
    return user_pattern(pattern)


def _user_metrics(pattern: Any, line: str) -> tuple[int | None, dict[str, float]]:
    return user_metrics(pattern, line, _finite)


# --- Points --------------------------------------------------------------------------------


def parse_stdout_metrics(
    lines: Iterable[str], *, extra_patterns: Sequence[str] = (), last_step: int | None = None
) -> list[MetricPoint]:
    """Metric points in stdout lines (wall time None: the caller knows when it read them).

    Recognised by default: `step N` (also `Step: N`, `global_step=N`, `iter N`)
    with the line's key=value / key: value numbers; Hugging Face `{'loss': ...}`
    dicts; tqdm/Lightning bars with `| n/total [..., loss=0.5]` postfixes (step
    `epoch * total + n` after `Epoch E:`); and, on lines without a step, the
    numbers of a line that names a loss (`loss: 0.53`, Keras's `- loss: 0.5 -
    accuracy: 0.8`). A line with neither step nor loss gives nothing, which keeps
    `NCCL_IB_DISABLE=1` and friends out.

    Lines without a step: once a line of this call has given a step, they share
    the latest one (a validation line printed after its step); before that, each
    is the next step of a running counter that continues from `last_step` (the
    last step the caller stored; -1 when None, so a log without steps counts 0,
    1, 2 ...). That suits Hugging Face's step-less dicts; the price is that a
    step-less line that opens a poll cycle lands one step after its real one.

    `extra_patterns` that fail validate_pattern are skipped; a valid one adds to
    (and for the same name overrides) the defaults, on the first 4 KiB of a line.
    """
    users = user_patterns(tuple(extra_patterns))
    step, stepped = last_step, False
    points: list[MetricPoint] = []
    for raw in lines:
        line = _ANSI.sub("", raw.replace("\0", ""))
        found_step, values = _default_metrics(line)
        for pattern in users:
            user_step, user_values = _user_metrics(pattern, line)
            found_step = user_step if user_step is not None else found_step
            values.update(user_values)
        if found_step is not None:
            step, stepped = found_step, True
        if not values:
            continue
        if step is None or (found_step is None and not stepped):
            step = 0 if step is None else step + 1
        points.extend(MetricPoint(name, step, value) for name, value in values.items())
    return points


def parse_metrics_jsonl(lines: Iterable[str]) -> tuple[list[MetricPoint], int]:
    """Points from metrics.jsonl lines, and how many non-blank lines were skipped as bad.

    A line is one JSON object with an integer `step` >= 0; each other finite
    number is a metric, and `time` (unix seconds) is the points' wall time, not
    a metric. Strings, booleans, nested values and non-finite numbers are
    ignored without making the line bad.
    """
    points: list[MetricPoint] = []
    bad = 0
    for line in lines:
        text = line.replace("\0", "").strip()
        if not text:
            continue
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):  # JSONDecodeError, too many digits, nesting
            bad += 1
            continue
        if not isinstance(record, dict):
            bad += 1
            continue
        step = record.get("step")
        if isinstance(step, float) and step.is_integer():
            step = int(step)
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            bad += 1
            continue
        time = _finite(record.get("time"))
        for name, raw in record.items():
            value = _finite(raw)
            if name not in ("step", "time") and value is not None and len(name) <= MAX_NAME_LENGTH:
                points.append(MetricPoint(name, step, value, time))
    return points, bad
