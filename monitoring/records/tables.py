"""Lightning's metrics.csv and HF's trainer_state.json into points.

metrics.csv is read by whole lines from where the last read stopped, its header kept
between reads: a `step` column, one column per logged name, empty cells where a row
logged no value of that name. Lightning rewrites the file from the start when a new name
appears (a wider header); the caller sees the header change and reads it again.
trainer_state.json is rewritten whole at each checkpoint: its `log_history` holds every
logged dict so far, each with its `step`. A NaN or infinite value (`nan` in a cell, `NaN`
in the JSON) is kept: it is a gap at its step, as on stdout.
"""

import csv
from dataclasses import dataclass, field

from monitoring.records.names import record_name
from portal_lib.fast_json import loads

MAX_COLUMNS = 200
_STEP_COLUMNS = ("step", "global_step")


@dataclass
class TableRead:
    points: list[tuple[str, int, float]] = field(default_factory=list)
    consumed: int = 0  # bytes read in whole (lines; the whole file for JSON)
    bad: int = 0  # rows or entries without a step, or a file that does not parse
    header: list[str] = field(default_factory=list)


def read_csv(data: bytes, header: list[str]) -> TableRead:
    """The rows of the whole lines in `data`; with no `header` yet its first line is one."""
    cut = data.rfind(b"\n") + 1
    read = TableRead(consumed=cut, header=list(header))
    lines = data[:cut].decode("utf-8", errors="replace").splitlines()
    for row in csv.reader(lines):
        if not row:
            continue
        if not read.header:
            read.header = [cell.strip() for cell in row[:MAX_COLUMNS]]
            continue
        _row(read, row)
    return read


def _row(read: TableRead, row: list[str]) -> None:
    cells = dict(zip(read.header, row, strict=False))
    step = next((_step(cells[c]) for c in _STEP_COLUMNS if c in cells), None)
    if step is None:
        read.bad += 1
        return
    for column, text in cells.items():
        value = _number(text)
        if value is not None and column not in _STEP_COLUMNS and column:
            read.points.append((record_name(column), step, value))


def read_trainer_state(data: bytes) -> TableRead:
    """The points of a whole trainer_state.json's `log_history`."""
    read = TableRead(consumed=len(data))
    try:
        state = loads(data)
    except (ValueError, RecursionError):
        read.bad += 1
        return read
    history = state.get("log_history") if isinstance(state, dict) else None
    for entry in history if isinstance(history, list) else ():
        step = entry.get("step") if isinstance(entry, dict) else None
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            read.bad += 1
            continue
        for key, raw in list(entry.items())[:MAX_COLUMNS]:
            value = raw if type(raw) in (int, float) else None
            if key != "step" and value is not None:
                read.points.append((record_name(key), step, float(value)))
    return read


def _step(text: str) -> int | None:
    value = _number(text)
    # inf and NaN are no integers: a row at no step
    return int(value) if value is not None and value.is_integer() and value >= 0 else None


def _number(text: str) -> float | None:
    text = text.strip()
    if not text or len(text) > 64:
        return None
    try:
        return float(text)
    except ValueError:
        return None
