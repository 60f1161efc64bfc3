"""Compaction: an attempt's blocks and new points into per-series chunks, in the append's call.

Level 0 of the tree is the attempt's blocks (`monitoring.series.write`); a compaction
makes of them one level-1 chunk per series, and merges up whatever level then holds
FANOUT chunks: sixteen level-1 chunks into one level-2, and so on; whatever reaches
CHUNK_SIZE points becomes a full chunk, never touched again. A point is thus rewritten
about log16(4096 / batch size) times, at most three, and a series has at most ~45
chunks that are not full. The compaction of any number of attempts costs the same few
queries: their blocks read, their `Series` rows found or made, their small chunks
listed, read and deleted, the blocks deleted, the new chunks inserted.
"""

import struct
from collections import defaultdict
from collections.abc import Collection, Iterable

import numpy as np

from monitoring.models.series import CHUNK_SIZE, Series, SeriesBlock, SeriesChunk
from monitoring.series.blocks import Block, unpack
from monitoring.series.chunks import Piece, compact, decode, encode, split
from monitoring.series.downsample import SUMMARY_RUN, Floats, summary, y_bounds
from portal_lib.bulk import Row, any_of, insert_new_rows, insert_rows

FANOUT = 16  # chunks of one level merged at once (and appends of an attempt per compaction)

Key = tuple[int, str]
_POINT = struct.Struct("<dd")
_PAIR = struct.Struct("<dddd")


def attempts_compact(new: dict[int, Block]) -> None:
    """Compact these attempts: their stored blocks, then `new` (this append's points)."""
    attempt_ids = sorted(new)
    found = SeriesBlock.objects.filter(attempt_id__in=attempt_ids).order_by("id")
    blocks: dict[int, list[Block]] = defaultdict(list)
    block_ids = []
    for block_id, attempt_id, data in found.values_list("id", "attempt_id", "data"):
        block_ids.append(block_id)
        blocks[attempt_id].append(unpack(data))
    aligned: dict[int, tuple[tuple[str, ...], Floats, Floats]] = {}
    incoming: dict[Key, tuple[Floats, Floats]] = {}
    for attempt_id in attempt_ids:
        group = [*blocks[attempt_id], new[attempt_id]]
        if _aligned(group):
            names = group[0].names
            aligned[attempt_id] = (
                names,
                np.stack([b.xs for b in group]),
                np.stack([b.ys for b in group]),
            )
            continue
        parts: dict[str, list[tuple[Floats, Floats]]] = defaultdict(list)
        for block in group:
            for name, xs, ys in block.series():
                parts[name].append((xs, ys))
        for name, found_parts in parts.items():
            incoming[(attempt_id, name)] = (
                np.concatenate([xs for xs, _ in found_parts]),
                np.concatenate([ys for _, ys in found_parts]),
            )
    keys = [*incoming, *((a, name) for a, (names, _, _) in aligned.items() for name in names)]
    ids = series_ids(attempt_ids, keys)
    climbing = {ids[key]: len(xs) for key, (xs, _) in incoming.items()}
    for attempt_id, (names, xs, _) in aligned.items():
        climbing.update((ids[(attempt_id, name)], len(xs)) for name in names)
    merging = _merge_plan(climbing)
    stored: dict[int, list[Piece]] = defaultdict(list)
    if merging:
        rows = SeriesChunk.objects.filter(any_of("id", merging)).order_by("id")
        for chunk_id, series_id, level, data in rows.values_list(
            "id", "series_id", "level", "data"
        ):
            stored[series_id].append(Piece(level, *decode(data), id=chunk_id))
    chunks: list[Row] = []
    others = [(ids[key], xs, ys) for key, (xs, ys) in incoming.items()]
    for attempt_id, (names, xs, ys) in aligned.items():
        series = [ids[(attempt_id, name)] for name in names]
        chunks += level_one_rows(series, xs, ys, rest=others, unless=stored)
    for series_id, xs, ys in others:
        if series_id not in stored and len(xs) < CHUNK_SIZE:  # one level-1 chunk
            chunks.append(chunk_row(series_id, Piece(1, *_sorted(xs, ys))))
            continue
        pieces = compact([*stored[series_id], *split(Piece(0, xs, ys))])
        chunks.extend(chunk_row(series_id, piece) for piece in pieces)
    if merging:
        SeriesChunk.objects.filter(any_of("id", merging)).delete()
    if block_ids:
        SeriesBlock.objects.filter(any_of("id", block_ids)).delete()
    insert_rows(SeriesChunk._meta.db_table, CHUNK_COLUMNS, chunks)


def _aligned(group: list[Block]) -> bool:
    """Whether every block holds one point of each of the same series: the usual poll."""
    first = group[0]
    return (
        len(group) <= SUMMARY_RUN
        and first.starts[-1] == len(first.names)  # one point per series
        and all(block.names == first.names and block.starts == first.starts for block in group)
    )


def level_one_rows(
    series: list[int],
    xs: Floats,
    ys: Floats,
    *,
    rest: list[tuple[int, Floats, Floats]],
    unless: Collection[int],
) -> list[Row]:
    """The level-1 chunk rows of `series` whose points are the columns of `xs` and `ys`
    (one row per append, at most SUMMARY_RUN), all at once: what `chunk_row` makes of
    each column. Columns whose xs go back or that hold a gap (NaN), and series in
    `unless` (chunks of theirs merge too), go to `rest` instead."""
    count = len(xs)
    forward = np.all(xs[1:] >= xs[:-1], axis=0) & ~np.isnan(ys).any(axis=0)
    data = np.ascontiguousarray(np.concatenate((xs.T, ys.T), axis=1), dtype="<f8").tobytes()
    width = 2 * count * 8
    # A summary keeps the first minimum and the first maximum, in x order (downsample.summary).
    columns = np.arange(len(series))
    low, high = ys.argmin(axis=0), ys.argmax(axis=0)
    first, last = np.minimum(low, high), np.maximum(low, high)
    ends = (xs[0], xs[-1], ys.min(axis=0), ys.max(axis=0))
    picked = (xs[first, columns], xs[last, columns], ys[first, columns], ys[last, columns])
    x_min, x_max, y_min, y_max = (values.tolist() for values in ends)
    x_a, x_b, y_a, y_b = (values.tolist() for values in picked)
    one = (first == last).tolist()
    rows: list[Row] = []
    for at, (series_id, ahead) in enumerate(zip(series, forward.tolist(), strict=True)):
        if not ahead or series_id in unless:
            rest.append((series_id, xs[:, at], ys[:, at]))
            continue
        blob = data[at * width : (at + 1) * width]
        if count <= 2:
            summarised = blob
        elif one[at]:  # first minimum and first maximum the same point: all ys equal
            summarised = _POINT.pack(x_a[at], y_a[at])
        else:
            summarised = _PAIR.pack(x_a[at], x_b[at], y_a[at], y_b[at])
        rows.append(
            (series_id, 1, count, x_min[at], x_max[at], y_min[at], y_max[at], blob, summarised)
        )
    return rows


def _sorted(xs: Floats, ys: Floats) -> tuple[Floats, Floats]:
    if len(xs) > 1 and np.any(xs[1:] < xs[:-1]):
        order = np.argsort(xs, kind="stable")
        return xs[order], ys[order]
    return xs, ys


def series_ids(attempt_ids: list[int], keys: Iterable[Key]) -> dict[Key, int]:
    """The ids of these series' rows (all of these attempts'), made where missing."""
    wanted = set(keys)
    rows = Series.objects.filter(attempt_id__in=attempt_ids).values_list("id", "attempt_id", "name")
    found = {(attempt_id, name): series_id for series_id, attempt_id, name in rows}
    missing = sorted(key for key in wanted if key not in found)
    made = insert_new_rows(
        Series._meta.db_table,
        (("attempt_id", "bigint"), ("name", "text")),
        missing,
        returning=("id", "attempt_id", "name"),
    )
    found.update(((attempt_id, name), series_id) for series_id, attempt_id, name in made)
    if len(made) < len(missing):  # made meanwhile by another writer
        found.update(
            ((attempt_id, name), series_id)
            for series_id, attempt_id, name in rows.filter(name__in={n for _, n in missing})
        )
    return {key: found[key] for key in wanted}


def _merge_plan(incoming: dict[int, int]) -> list[int]:
    """The stored chunks a compaction of these series merges (series id: new points),
    found from their sizes.

    All level-0 chunks merge (chunks a per-series append made before blocks existed);
    so does any level that then holds FANOUT chunks. The remainder of a merge (what
    does not fill whole chunks) goes up one level. So the merged levels of a series are
    0 to some k.
    """
    rows = SeriesChunk.objects.filter(any_of("series_id", incoming), count__lt=CHUNK_SIZE)
    levels: dict[int, dict[int, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for chunk_id, series_id, level, count in rows.values_list("id", "series_id", "level", "count"):
        levels[series_id][level].append((chunk_id, count))
    chosen: list[int] = []
    for series_id, by_level in levels.items():
        top = None
        climbing = incoming[series_id]  # points climbing from the level below
        level = 0
        while level == 0 or climbing:
            found = by_level.get(level, [])
            if level and len(found) + 1 < FANOUT:
                break
            if found:
                top = level
            climbing = (sum(count for _, count in found) + climbing) % CHUNK_SIZE
            level += 1
        if top is not None:
            chosen += [
                chunk_id
                for level, found in by_level.items()
                if level <= top
                for chunk_id, _ in found
            ]
    return chosen


CHUNK_COLUMNS = (
    ("series_id", "bigint"),
    ("level", "smallint"),
    ("count", "integer"),
    ("x_min", "float8"),
    ("x_max", "float8"),
    ("y_min", "float8"),
    ("y_max", "float8"),
    ("data", "bytea"),
    ("summary", "bytea"),
)


def chunk_row(series_id: int, piece: Piece) -> Row:
    """A row of CHUNK_COLUMNS."""
    if len(piece.xs) == 1:  # the point is its own summary
        x, y = float(piece.xs[0]), float(piece.ys[0])
        point = _POINT.pack(x, y)
        return (series_id, piece.level, 1, x, x, y, y, point, point)
    return (
        series_id,
        piece.level,
        len(piece.xs),
        float(piece.xs[0]),
        float(piece.xs[-1]),
        *y_bounds(piece.ys),
        encode(piece.xs, piece.ys),
        encode(*summary(piece.xs, piece.ys)),
    )
