"""Many series' points in one blob: a SeriesBlock's new points, a SeriesHead's last ones (pure).

Layout: a little-endian uint32 `n`, `n` bytes of JSON `[names, counts]` padded with
spaces to a multiple of 8 bytes, then float64 little-endian: the xs of every series (in
`names` order, each series' points in arrival order), then their ys in the same order.
JSON, so that any name a job gives round-trips; one header per blob, so that a poll's
row for an attempt costs one `json.dumps` whatever its number of series.
"""

import json
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate

import numpy as np

from monitoring.series.downsample import Floats

_LENGTH = struct.Struct("<I")


@dataclass(frozen=True)
class Block:
    """Points of several series; series `names[i]` holds points starts[i]:starts[i + 1]."""

    names: tuple[str, ...]
    starts: tuple[int, ...]  # len(names) + 1 offsets into xs and ys
    xs: Floats
    ys: Floats

    def points(self, name: str) -> tuple[Floats, Floats] | None:
        """The series' points in arrival order; None when the block has none of it."""
        try:
            at = self.names.index(name)
        except ValueError:
            return None
        start, stop = self.starts[at], self.starts[at + 1]
        return self.xs[start:stop], self.ys[start:stop]

    def series(self) -> Iterator[tuple[str, Floats, Floats]]:
        for at, name in enumerate(self.names):
            start, stop = self.starts[at], self.starts[at + 1]
            yield name, self.xs[start:stop], self.ys[start:stop]

    def last_points(self) -> dict[str, tuple[float, float]]:
        """Each series' last point in arrival order (a head holds exactly one per series)."""
        ends = [stop - 1 for stop in self.starts[1:]]
        return dict(
            zip(
                self.names,
                zip(self.xs[ends].tolist(), self.ys[ends].tolist(), strict=True),
                strict=True,
            )
        )


EMPTY = Block((), (0,), np.zeros(0), np.zeros(0))


# Every poll packs and reads a block and a head per attempt, and attempts of one training
# script give the same names: their headers are made and read once.
@lru_cache(maxsize=4096)
def header(names: tuple[str, ...], counts: tuple[int, ...]) -> bytes:
    """The length, JSON and padding before the floats."""
    text = json.dumps([names, counts], separators=(",", ":")).encode()
    padding = -(_LENGTH.size + len(text)) % 8
    return _LENGTH.pack(len(text)) + text + b" " * padding


@lru_cache(maxsize=4096)
def _layout(text: bytes) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """A header's names and series offsets."""
    names, counts = json.loads(text)
    return tuple(names), (0, *accumulate(counts))


def pack(names: Sequence[str], counts: Sequence[int], xs: Floats, ys: Floats) -> bytes:
    """`xs` and `ys` hold the series' points one series after the other, in `names` order."""
    if len(xs) != sum(counts) or len(ys) != len(xs) or len(counts) != len(names):
        raise ValueError("a block needs one count per name and one y per x")
    return header(tuple(names), tuple(counts)) + _floats(xs) + _floats(ys)


def pack_points(names: Sequence[str], xs: Floats, ys: Floats) -> bytes:
    """One point per series: a head's layout."""
    return pack(names, (1,) * len(names), xs, ys)


def unpack(blob: bytes | memoryview) -> Block:
    data = bytes(blob)
    if not data:
        return EMPTY
    (length,) = _LENGTH.unpack_from(data)
    names, starts = _layout(data[_LENGTH.size : _LENGTH.size + length])
    start = _LENGTH.size + length + (-(_LENGTH.size + length) % 8)
    values = np.frombuffer(data, dtype="<f8", offset=start)
    half = len(values) // 2
    return Block(names, starts, values[:half], values[half:])


def _floats(values: Floats) -> bytes:
    return np.ascontiguousarray(values, dtype="<f8").tobytes()
