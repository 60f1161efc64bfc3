"""Append points to the series behind every chart (the layout: `monitoring.series`).

Appending. Each append adds one small chunk per series (level 0) and never rewrites
anything: rewriting an "open" 64 KiB tail chunk every second for thousands of live
series would write gigabytes per hour. Instead, every FANOUT-th append of a series
(staggered between series) compacts it in the same call, like a small LSM tree: the
level-0 chunks are merged into one level-1 chunk, sixteen level-1 chunks into one
level-2, and so on; whatever reaches CHUNK_SIZE points becomes a full chunk, never
touched again. A point is thus rewritten about log16(4096 / batch size) times, at most
three, and a series has at most ~45 chunks that are not full. A call costs the same
few queries whatever the number of series: one upsert of the `Series` rows (which also
says which are due for compaction), one insert of the new chunks, and for the due
series one listing, one read and one delete of their small chunks. On PostgreSQL the
rows travel by binary COPY (`portal_lib.bulk`): the Series rows into a staging table
that one INSERT ... ON CONFLICT merges, the chunks straight into their table; SQLite
gets the same rows as plain statements.

Where a rule about the points themselves belongs (which of two values for one step
is kept, say): `_batches` sees each call's points per series in arrival order, and
`compact` sees a series' stored pieces in arrival order (chunk ids grow with arrival,
COPY included) before the new ones, so "the newest value per step" can be applied
in both without touching how rows are written.
"""

import logging
import struct
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.db.models import Q, QuerySet

from monitoring.chunks import Piece, compact, decode, encode, split
from monitoring.downsample import Floats, summary
from monitoring.models.series import CHUNK_SIZE, Series, SeriesChunk
from monitoring.series import Key
from portal_lib.bulk import Row, copy_enabled, copy_rows, row_source, staged_rows

log = logging.getLogger(__name__)

_POINT = struct.Struct("<dd")

FANOUT = 16  # chunks of one level merged at once
NAME_MAX = Series._meta.get_field("name").max_length or 200


# --- appending -----------------------------------------------------------------------


def series_append(*, points: Iterable[tuple[int, str, float, float]]) -> int:
    """Store (attempt_id, name, x, y) points of any attempts and series; returns how many."""
    batches = _batches(points)
    if not batches:
        return 0
    with transaction.atomic():
        series = _upsert_series(batches)
        due = {series_id: key for key, (series_id, is_due) in series.items() if is_due}
        merged = _merge_plan(due, batches) if due else None
        stored: dict[int, list[Piece]] = defaultdict(list)
        if merged is not None:
            rows = merged.order_by("id").values_list("id", "series_id", "level", "data")
            for chunk_id, series_id, level, data in rows:
                stored[series_id].append(Piece(level, *decode(data), id=chunk_id))
        chunks: list[Row] = []
        for key, (xs, ys) in batches.items():
            series_id, is_due = series[key]
            if len(xs) == 1 and not is_due:  # most series of a poll: one point, one chunk
                chunks.append(_point_chunk(series_id, float(xs[0]), float(ys[0])))
                continue
            pieces = split(Piece(0, xs, ys))
            if is_due:
                pieces = compact([*stored[series_id], *pieces])
            chunks.extend(_chunk(series_id, piece) for piece in pieces)
        if merged is not None:
            merged.delete()
        _insert_chunks(chunks)
    return sum(len(xs) for xs, _ in batches.values())


def _batches(points: Iterable[tuple[int, str, float, float]]) -> dict[Key, tuple[Floats, Floats]]:
    """Group points by series, finite ones only, in arrival order; series in key order.

    A poll brings one or a few points for each of tens of thousands of series, so the
    points go into numpy once, whole, and each series gets a slice of them.
    """
    keys: dict[Key, int] = {}
    groups: list[int] = []
    x_list: list[float] = []
    y_list: list[float] = []
    for attempt_id, name, x, y in points:
        group = keys.get((attempt_id, name))
        if group is None:
            group = keys[(attempt_id, name)] = len(keys)
        groups.append(group)
        x_list.append(x)
        y_list.append(y)
    if not groups:
        return {}
    xs = np.asarray(x_list, dtype=np.float64)
    ys = np.asarray(y_list, dtype=np.float64)
    ids = np.asarray(groups, dtype=np.int64)
    finite = np.isfinite(xs) & np.isfinite(ys)
    if not finite.all():
        xs, ys, ids = xs[finite], ys[finite], ids[finite]
    order = np.argsort(ids, kind="stable")  # stable: arrival order within a series
    xs, ys, ids = xs[order], ys[order], ids[order]
    starts = np.flatnonzero(np.diff(ids)) + 1
    edges = zip(
        ids[np.concatenate(([0], starts))].tolist() if len(ids) else [],
        np.concatenate(([0], starts)).tolist(),
        np.concatenate((starts, [len(ids)])).tolist(),
        strict=True,
    )
    spans = {group: (start, stop) for group, start, stop in edges}
    batches = {}
    for (attempt_id, name), group in sorted(keys.items()):
        if not name or len(name) > NAME_MAX:
            log.warning(
                "series name %r of attempt %s skipped: 1-%s characters",
                name[:300],
                attempt_id,
                NAME_MAX,
            )
            continue
        span = spans.get(group)
        if span is not None:
            batches[(attempt_id, name)] = (xs[span[0] : span[1]], ys[span[0] : span[1]])
    return batches


_SERIES_COLUMNS = (
    ("attempt_id", "bigint"),
    ("name", "text"),
    ("last_x", "float8"),
    ("last_y", "float8"),
    ("unmerged", "smallint"),
)


def _upsert_series(batches: dict[Key, tuple[Floats, Floats]]) -> dict[Key, tuple[int, bool]]:
    """Create or update each series' row; returns its id and whether it is due for compaction.

    Rows go in key order so that concurrent appenders lock them in the same order.
    """
    table = connection.ops.quote_name(Series._meta.db_table)
    # A new series starts its count at a point of the cycle that depends on its name, so
    # that series created together are not all compacted in the same call.
    rows = [
        (attempt_id, name, float(xs[-1]), float(ys[-1]), _first_count(attempt_id, name))
        for (attempt_id, name), (xs, ys) in batches.items()
    ]
    columns = ", ".join(name for name, _ in _SERIES_COLUMNS)
    result = {}
    with connection.cursor() as cursor:
        for source, params in _series_sources(rows):
            # Only the table name and placeholders are formatted in; values are parameters.
            cursor.execute(
                f"{source.prefix}INSERT INTO {table} ({columns}) {source.select}"
                " ON CONFLICT (attempt_id, name) DO UPDATE SET"
                " last_x = excluded.last_x, last_y = excluded.last_y,"
                f" unmerged = CASE WHEN {table}.unmerged + 1 >= {FANOUT} THEN 0"
                f" ELSE {table}.unmerged + 1 END"
                " RETURNING id, attempt_id, name, unmerged",
                params,
            )
            for series_id, attempt_id, name, unmerged in cursor.fetchall():
                result[(attempt_id, name)] = (series_id, unmerged == 0)
    return result


@dataclass(frozen=True)
class _Source:
    prefix: str  # a WITH clause, or nothing
    select: str


def _series_sources(rows: list[Row]) -> Iterator[tuple[_Source, list[Any] | None]]:
    """The upsert's rows as SELECTs: staged by COPY, or as parameters on the plain path."""
    columns = ", ".join(name for name, _ in _SERIES_COLUMNS)
    # SQLite needs the WHERE to read ON CONFLICT as an upsert, not a join.
    if copy_enabled():
        taken = staged_rows("portal_series_batch", _SERIES_COLUMNS, rows)
        select = f"SELECT {columns} FROM batch WHERE true ORDER BY attempt_id, name"  # noqa: S608
        yield _Source(f"WITH batch AS ({taken}) ", select), None
        return
    for source, params in row_source([kind for _, kind in _SERIES_COLUMNS], rows):
        yield _Source("", f"SELECT * FROM ({source}) AS batch WHERE true"), params  # noqa: S608


def _first_count(attempt_id: int, name: str) -> int:
    return 1 + zlib.crc32(f"{attempt_id}/{name}".encode()) % (FANOUT - 1)


_CHUNK_COLUMNS = (
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


def _insert_chunks(rows: list[Row]) -> None:
    if not rows:
        return
    if copy_enabled():
        copy_rows(SeriesChunk._meta.db_table, _CHUNK_COLUMNS, rows)
        return
    table = connection.ops.quote_name(SeriesChunk._meta.db_table)
    columns = ", ".join(name for name, _ in _CHUNK_COLUMNS)
    types = [kind for _, kind in _CHUNK_COLUMNS]
    with connection.cursor() as cursor:
        for source, params in row_source(types, rows):
            cursor.execute(
                f"INSERT INTO {table} ({columns}) SELECT * FROM ({source}) AS batch",  # noqa: S608
                params,
            )


def _merge_plan(
    due: dict[int, Key], batches: dict[Key, tuple[Floats, Floats]]
) -> "QuerySet[SeriesChunk] | None":
    """The stored chunks a compaction of the `due` series merges, found from their sizes.

    All level-0 chunks merge; so does any level that then holds FANOUT chunks.  The
    remainder of a merge (what does not fill whole chunks) goes up one level.  So the
    merged levels of a series are 0 to some k, and the chunks are selected by series
    and k (a few ids per series would be hundreds of thousands of parameters).
    """
    rows = SeriesChunk.objects.filter(series_id__in=due, count__lt=CHUNK_SIZE).values_list(
        "series_id", "level", "count"
    )
    levels: dict[int, dict[int, list[int]]] = {series_id: defaultdict(list) for series_id in due}
    for series_id, level, count in rows:
        levels[series_id][level].append(count)
    by_top: dict[int, list[int]] = defaultdict(list)
    for series_id, key in due.items():
        by_level = levels[series_id]
        top = None
        incoming = len(batches[key][0])  # points climbing from the level below
        level = 0
        while level == 0 or incoming:
            counts = by_level.pop(level, [])
            if level and len(counts) + 1 < FANOUT:
                break
            if counts:
                top = level
            incoming = (sum(counts) + incoming) % CHUNK_SIZE
            level += 1
        if top is not None:
            by_top[top].append(series_id)
    if not by_top:
        return None
    chosen = Q()
    for top, series_ids in by_top.items():
        chosen |= Q(series_id__in=series_ids, level__lte=top)
    return SeriesChunk.objects.filter(chosen, count__lt=CHUNK_SIZE)


def _chunk(series_id: int, piece: Piece) -> Row:
    """A row of `_CHUNK_COLUMNS`."""
    if len(piece.xs) == 1:  # plain floats are faster than numpy
        return _point_chunk(series_id, float(piece.xs[0]), float(piece.ys[0]), piece.level)
    return (
        series_id,
        piece.level,
        len(piece.xs),
        float(piece.xs[0]),
        float(piece.xs[-1]),
        float(piece.ys.min()),
        float(piece.ys.max()),
        encode(piece.xs, piece.ys),
        encode(*summary(piece.xs, piece.ys)),
    )


def _point_chunk(series_id: int, x: float, y: float, level: int = 0) -> Row:
    """The row of a one-point chunk: `encode`'s layout, and the point is its own summary."""
    point = _POINT.pack(x, y)
    return (series_id, level, 1, x, x, y, y, point, point)
