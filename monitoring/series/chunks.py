"""A series chunk in memory and on disk, and how compaction merges chunks (pure numpy).

A chunk's points are one blob of little-endian float64, all xs then all ys;
`compact` merges the pieces `series._merge_plan` chose, level by level.
"""

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from monitoring.models.series import CHUNK_SIZE
from monitoring.series.downsample import Floats


def encode(xs: Floats, ys: Floats) -> bytes:
    return np.concatenate((xs, ys)).astype("<f8", copy=False).tobytes()


def decode(blob: bytes | memoryview) -> tuple[Floats, Floats]:
    values = np.frombuffer(blob, dtype="<f8")
    half = len(values) // 2
    return values[:half], values[half:]


@dataclass
class Piece:
    """Points of one chunk in memory; `id` is set when it is already stored."""

    level: int
    xs: Floats
    ys: Floats
    id: int | None = None


def compact(pieces: list[Piece]) -> list[Piece]:
    """Merge the pieces as `series._merge_plan` decided (it chose which stored pieces to load):
    each level that has a stored piece, or is level 0, merges into the next one up.
    """
    levels: dict[int, list[Piece]] = defaultdict(list)
    for piece in pieces:
        levels[piece.level].append(piece)
    merging = {0} | {piece.level for piece in pieces if piece.id is not None}
    new: list[Piece] = []
    level = 0
    while levels:
        group = levels.pop(level, [])
        if level in merging:
            xs = np.concatenate([piece.xs for piece in group])
            ys = np.concatenate([piece.ys for piece in group])
            for piece in split(Piece(level + 1, xs, ys)):
                (levels[level + 1] if len(piece.xs) < CHUNK_SIZE else new).append(piece)
        else:
            new.extend(group)
        level += 1
    return new


def split(piece: Piece) -> list[Piece]:
    """Sort by x (stable) and cut into full chunks and a remainder."""
    xs, ys = piece.xs, piece.ys
    if len(xs) > 1 and np.any(xs[1:] < xs[:-1]):
        order = np.argsort(xs, kind="stable")
        xs, ys = xs[order], ys[order]
    if len(xs) <= CHUNK_SIZE:
        return [Piece(piece.level, xs, ys, piece.id)]
    return [
        Piece(piece.level, xs[start : start + CHUNK_SIZE], ys[start : start + CHUNK_SIZE])
        for start in range(0, len(xs), CHUNK_SIZE)
    ]
