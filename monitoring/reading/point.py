"""What the stdout reader gives and holds: a point, a line read, a record over a bar."""

from __future__ import annotations

from dataclasses import dataclass

from monitoring.reading.fields import LineFields
from monitoring.reading.state import Value


@dataclass
class Point:
    step: int
    values: dict[str, Value]
    counted: bool = False  # no step was printed: the step is a running count
    block: int | None = None


@dataclass(frozen=True)
class Line:
    text: str  # without its log prefix
    level: str  # the level its log prefix names, or ''
    found: LineFields
    user: bool  # a user pattern matched it
    over_bar: int | None = None  # N of the bar it was written over, right after a clear


@dataclass
class Record:
    """A step-less record written over a cleared bar: its point (at the step the bar showed
    before) and the bar's N, held until the next text says whether that bar was refreshed."""

    point: Point
    bar: int
