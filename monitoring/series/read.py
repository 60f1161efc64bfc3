"""Append, read and downsample the (x, y) series behind every chart.

Layout.  A series' points live in `SeriesChunk` rows of at most CHUNK_SIZE (4,096)
points each, sorted by x and stored as one `bytea` of float64 (all xs, then all ys),
with the chunk's x/y bounds and count, and a *summary*: the min and max point of
every run of 64 points (2 KiB per full chunk).  One row per point would need a
million rows for a long run, too many to read in 100 ms.  The newest points are not in
chunks yet: each append writes one `SeriesBlock` per attempt with all its series' new
points, and the attempt's `SeriesHead` holds every series' last point (for live
numbers) and so names its series; every FANOUT appends the blocks become chunks.

Appending is `monitoring.series.write`, compaction `monitoring.series.compact`.

Reading.  The chunks overlapping [x_from, x_to] are listed (bounds only, no blobs),
and in the same statement the attempt's blocks are read whole (at most FANOUT - 1,
small).  When there are few points in range the chunks are read whole and
downsampled.  When there are many (each output bucket would span at least 8 runs of
64), the chunks entirely inside the range contribute only their summaries, and just
the chunks that straddle a bound, plus the first and last chunk, are read whole, so
that the first and last point are exact.  A full read of a million points thus
decodes ~31,000 summary points and two raw chunks.  Summary points are real points,
so no spike is lost; a bucket's min or max can only be off by falling in a
neighbouring 64-point run at its edge.

Non-finite values are gaps.  A step whose value was NaN or infinite is stored with
y = NaN (x stays finite; an infinity becomes NaN too): it is never dropped silently and
never a series of its own, and a later value for the step replaces it like any other.
Chunk bounds, summaries' minima and maxima and downsampling take the finite values
only, and keep a series' gaps as well (a bucket's first; `monitoring.series.downsample`).
A read returns the finite points in `xs`/`ys` and the gaps' xs in `nonfinite`, so a
caller that only computes with values never sees a NaN; a chart takes
`SeriesData.with_gaps` (y None at each gap), and JSON never holds a bare NaN.  A
head's last point may be a gap: `last_points` gives it as stored (y NaN).

X need not increase: appending a step again keeps both values (ingest's rule
keeps the newest, `monitoring.reading.overwrite`), and reads sort by x (equal xs in no
particular order).  Works on PostgreSQL and SQLite.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from django.db.models import BinaryField, Case, F, FloatField, Q, QuerySet, Subquery, Value, When

from monitoring.models.series import Series, SeriesBlock, SeriesChunk, SeriesHead
from monitoring.series.blocks import unpack
from monitoring.series.chunks import decode
from monitoring.series.downsample import SUMMARY_RUN, Floats, downsample

log = logging.getLogger(__name__)

Key = tuple[int, str]
# Summaries stand in for raw points once each output bucket spans this many runs.
RUNS_PER_BUCKET = 8


@dataclass(frozen=True)
class SeriesData:
    xs: list[float]  # the finite points
    ys: list[float]
    total: int  # points in the range before downsampling, gaps included
    downsampled: bool
    nonfinite: list[float] = field(default_factory=list)  # xs whose value was NaN or inf

    def with_gaps(self) -> tuple[list[float], list[float | None]]:
        """Every point in x order, y None at each gap: what a chart draws (and JSON holds)."""
        return merge_gaps(self.xs, self.ys, self.nonfinite)


def merge_gaps(
    xs: list[float], ys: list[float], gaps: list[float]
) -> tuple[list[float], list[float | None]]:
    """Finite points and gap xs (each in x order) as one list of points, y None at a gap."""
    if not gaps:
        return xs, list(ys)
    points = sorted([*zip(xs, ys, strict=True), *((x, None) for x in gaps)], key=_by_x)
    return [x for x, _ in points], [y for _, y in points]


def _by_x(point: tuple[float, float | None]) -> float:
    return point[0]


def split_gaps(xs: Floats, ys: Floats) -> tuple[Floats, Floats, Floats]:
    """The finite points' xs and ys, and the gaps' xs."""
    gaps = np.isnan(ys)
    if not gaps.any():
        return xs, ys, xs[:0]
    return xs[~gaps], ys[~gaps], xs[gaps]


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
    bounds = []
    block_xs, block_ys = [], []
    # One statement, so one snapshot: a compaction cannot move points from the blocks
    # read into chunks not listed. One that runs after it replaces listed chunks (their
    # blobs are then missing: plan again) or only adds chunks of points read here.
    for chunk_id, x_min, x_max, count, data in listing(chunks, attempt_ids=[attempt_id]):
        if data is None:
            bounds.append(ChunkBounds(chunk_id, x_min, x_max, count))
            continue
        found = unpack(data).points(name)
        if found is not None:
            block_xs.append(found[0])
            block_ys.append(found[1])
    new_xs, new_ys = _inside(block_xs, block_ys, lo, hi)
    if (not bounds and not len(new_xs)) or lo > hi:
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
    rows = list(blobs.values_list("id", "blob")) if wanted else []
    if len(rows) != len(wanted):
        return None  # compacted meanwhile: plan again
    raw = set(plan.raw)
    total = plan.summarised_count + len(new_xs)
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
    xs_parts.append(new_xs)
    ys_parts.append(new_ys)
    out_xs, out_ys = downsample(np.concatenate(xs_parts), np.concatenate(ys_parts), max_points)
    finite_xs, finite_ys, gap_xs = split_gaps(out_xs, out_ys)
    return SeriesData(
        xs=finite_xs.tolist(),
        ys=finite_ys.tolist(),
        total=total,
        downsampled=total > len(out_xs),
        nonfinite=gap_xs.tolist(),
    )


ListingRow = tuple[int, float, float, int, bytes | memoryview | None]


def listing(chunks: QuerySet[SeriesChunk], *, attempt_ids: list[int]) -> list[ListingRow]:
    """The chunks' (id, x_min, x_max, count, None) and the attempts' blocks as (id, 0, 0,
    count, data), in one statement: one snapshot of where the points are."""
    bounds = chunks.values_list(
        "id", "x_min", "x_max", "count", Value(None, output_field=BinaryField())
    )
    blocks = SeriesBlock.objects.filter(attempt_id__in=attempt_ids).values_list(
        "id",
        Value(0.0, output_field=FloatField()),
        Value(0.0, output_field=FloatField()),
        "count",
        "data",
    )
    return list(bounds.union(blocks, all=True))


def _inside(xs: list[Floats], ys: list[Floats], lo: float, hi: float) -> tuple[Floats, Floats]:
    """The blocks' points with lo <= x <= hi, in arrival order."""
    if not xs:
        return np.zeros(0), np.zeros(0)
    all_xs, all_ys = np.concatenate(xs), np.concatenate(ys)
    inside = (all_xs >= lo) & (all_xs <= hi)
    return all_xs[inside], all_ys[inside]


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
    return sorted(last_points(attempt_ids=[attempt_id]).get(attempt_id, {}))


def last_points(*, attempt_ids: Iterable[int]) -> dict[int, dict[str, tuple[float, float]]]:
    """Each attempt's series with their last point appended (arrival order); one query."""
    heads = SeriesHead.objects.filter(attempt_id__in=list(attempt_ids))
    return {
        attempt_id: unpack(data).last_points()
        for attempt_id, data in heads.values_list("attempt_id", "data")
    }


def series_last(
    *, attempt_ids: Iterable[int], names: Iterable[str]
) -> dict[Key, tuple[float, float]]:
    """The last point appended to each of these series, by (attempt_id, name); one query."""
    wanted = set(names)
    return {
        (attempt_id, name): point
        for attempt_id, points in last_points(attempt_ids=attempt_ids).items()
        for name, point in points.items()
        if name in wanted
    }
