"""Append, read and downsample the (x, y) series behind every chart.

Layout.  A `Series` row per (attempt, name) holds the latest point (for live numbers)
and a counter; its points live in `SeriesChunk` rows of at most CHUNK_SIZE (4,096)
points each, sorted by x and stored as one `bytea` of float64 (all xs, then all ys),
with the chunk's x/y bounds and count, and a *summary*: the min and max point of
every run of 64 points (2 KiB per full chunk).  One row per point would need a
million rows for a long run, too many to read in 100 ms.

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

Reading.  The chunks overlapping [x_from, x_to] are listed (bounds only, no blobs).
When there are few points in range they are read whole and downsampled.  When there
are many (each output bucket would span at least 8 runs of 64), the chunks entirely
inside the range contribute only their summaries, and just the chunks that straddle
a bound, plus the first and last chunk, are read whole, so that the first and last
point are exact.  A full read of a million points thus decodes ~31,000 summary points
and two raw chunks.  Summary points are real points, so no spike is lost; a bucket's
min or max can only be off by falling in a neighbouring 64-point run at its edge.

Non-finite values are kept out: append drops points whose x or y is NaN or infinite
(the returned count says how many were stored), so summaries and reads never see
them.  X need not increase: a resumed run that repeats steps keeps both values, and
reads sort by x (equal xs in no particular order).  Works on PostgreSQL and SQLite.
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
from django.db.models import BinaryField, Case, F, Q, QuerySet, Subquery, When

from monitoring.chunks import Piece, compact, decode, encode, split
from monitoring.downsample import SUMMARY_RUN, Floats, downsample, summary
from monitoring.models.series import CHUNK_SIZE, Series, SeriesChunk
from portal_lib.bulk import Row, copy_enabled, copy_rows, row_source, staged_rows

log = logging.getLogger(__name__)

Key = tuple[int, str]
_POINT = struct.Struct("<dd")

FANOUT = 16  # chunks of one level merged at once
# Summaries stand in for raw points once each output bucket spans this many runs.
RUNS_PER_BUCKET = 8
NAME_MAX = Series._meta.get_field("name").max_length or 200


@dataclass(frozen=True)
class SeriesData:
    xs: list[float]
    ys: list[float]
    total: int  # points in the range before downsampling
    downsampled: bool


@dataclass(frozen=True)
class ChunkBounds:
    id: int
    x_min: float
    x_max: float
    count: int


@dataclass(frozen=True)
class ReadPlan:
    raw: list[int]  # chunks read whole
    summarised: list[int]  # chunks read as their summary, all points in range
    summarised_count: int


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
    if len(piece.xs) == 1:  # most of a poll's chunks: plain floats are faster than numpy
        x, y = float(piece.xs[0]), float(piece.ys[0])
        point = _POINT.pack(x, y)  # `encode`'s layout; a point is its own summary
        return (series_id, piece.level, 1, x, x, y, y, point, point)
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


# --- reading -------------------------------------------------------------------------


# A read that a concurrent compaction keeps invalidating is planned again this often.
READ_TRIES = 5


class SeriesBusy(RuntimeError):
    """The series was compacted under every try of a read."""


def series_read(
    *,
    attempt_id: int,
    name: str,
    x_from: float | None = None,
    x_to: float | None = None,
    max_points: int = 2000,
) -> SeriesData:
    """The points with x_from <= x <= x_to, downsampled to at most `max_points`."""
    if max_points < 2:
        raise ValueError("max_points must be at least 2 (the first and the last point)")
    lo = float("-inf") if x_from is None else x_from
    hi = float("inf") if x_to is None else x_to
    for _ in range(READ_TRIES):
        data = _read_once(attempt_id, name, x_from, x_to, lo, hi, max_points)
        if data is not None:
            return data
    raise SeriesBusy(f"series {name!r} kept changing under the read; try again")


def _read_once(
    attempt_id: int,
    name: str,
    x_from: float | None,
    x_to: float | None,
    lo: float,
    hi: float,
    max_points: int,
) -> SeriesData | None:
    """One read; None when a compaction replaced chunks between planning and reading."""
    # A subquery, not a join: the planner then always walks the (series, x_min) index.
    series_id = Series.objects.filter(attempt_id=attempt_id, name=name).values("id")
    chunks = SeriesChunk.objects.filter(series_id=Subquery(series_id))
    if x_from is not None:
        chunks = chunks.filter(x_max__gte=x_from)
    if x_to is not None:
        chunks = chunks.filter(x_min__lte=x_to)
    bounds = [ChunkBounds(*row) for row in chunks.values_list("id", "x_min", "x_max", "count")]
    if not bounds or lo > hi:
        return SeriesData(xs=[], ys=[], total=0, downsampled=False)
    plan = plan_read(bounds, lo=lo, hi=hi, max_points=max_points)
    wanted = plan.raw + plan.summarised
    blobs = SeriesChunk.objects.filter(id__in=wanted).order_by("x_min", "id")
    if plan.summarised:
        summarised = Q(id__in=plan.summarised)
        blobs = blobs.annotate(
            blob=Case(
                When(summarised, then=F("summary")),
                default=F("data"),
                output_field=BinaryField(),
            )
        )
    else:
        blobs = blobs.annotate(blob=F("data"))
    rows = list(blobs.values_list("id", "blob"))
    if len(rows) != len(wanted):
        return None  # compacted meanwhile: plan again
    raw = set(plan.raw)
    total = plan.summarised_count
    xs_parts, ys_parts = [], []
    for chunk_id, blob in rows:
        xs, ys = decode(blob)
        if chunk_id in raw:
            inside = (xs >= lo) & (xs <= hi)
            if not inside.all():
                xs, ys = xs[inside], ys[inside]
            total += len(xs)
        xs_parts.append(xs)
        ys_parts.append(ys)
    out_xs, out_ys = downsample(np.concatenate(xs_parts), np.concatenate(ys_parts), max_points)
    return SeriesData(
        xs=out_xs.tolist(), ys=out_ys.tolist(), total=total, downsampled=total > len(out_xs)
    )


def plan_read(bounds: list[ChunkBounds], *, lo: float, hi: float, max_points: int) -> ReadPlan:
    """Which chunks to read whole and which as their summary."""
    if sum(chunk.count for chunk in bounds) < RUNS_PER_BUCKET * SUMMARY_RUN * max_points // 2:
        return ReadPlan(raw=[chunk.id for chunk in bounds], summarised=[], summarised_count=0)
    inner = [chunk for chunk in bounds if lo <= chunk.x_min and chunk.x_max <= hi]
    edges = set()
    if inner:
        edges = {
            min(inner, key=lambda chunk: chunk.x_min).id,
            max(inner, key=lambda chunk: chunk.x_max).id,
        }
    summarised = [chunk for chunk in inner if chunk.id not in edges]
    ids = {chunk.id for chunk in summarised}
    return ReadPlan(
        raw=[chunk.id for chunk in bounds if chunk.id not in ids],
        summarised=[chunk.id for chunk in summarised],
        summarised_count=sum(chunk.count for chunk in summarised),
    )


def series_names(*, attempt_id: int) -> list[str]:
    """The names of an attempt's series, sorted."""
    return list(
        Series.objects.filter(attempt_id=attempt_id).order_by("name").values_list("name", flat=True)
    )


def series_last(
    *, attempt_ids: Iterable[int], names: Iterable[str]
) -> dict[Key, tuple[float, float]]:
    """The last point appended to each of these series, by (attempt_id, name); one query."""
    rows = Series.objects.filter(attempt_id__in=list(attempt_ids), name__in=list(names))
    return {
        (attempt_id, name): (x, y)
        for attempt_id, name, x, y in rows.values_list("attempt_id", "name", "last_x", "last_y")
    }
