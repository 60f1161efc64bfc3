"""Each chosen run's series downsampled to the chart's width, all its attempts one curve.

Each curve keeps the first and last point and the minimum and maximum of every x bucket
(and its gaps, where a value was NaN or infinite), so a one-step spike survives, read from
the chunks' min/max summaries where a bucket spans many points (monitoring.series.read's
layout): the server never reads every point of a long run, and all runs are read in two
queries. A job's attempts are one curve (a restart continues the run). On a time axis
each attempt's points go through its clock (monitoring.runs.step_clock, one query more)
before the downsampling.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db.models import BinaryField, Case, F, FloatField, Value, When
from django.utils import timezone

from jobs.models import Attempt, Job
from jobs.rundir import gpu_series
from monitoring.models import SeriesBlock, SeriesChunk
from monitoring.runs.step_clock import STEP, AttemptTimes, attempt_times, on_axis, run_starts
from monitoring.series.blocks import unpack
from monitoring.series.chunks import decode
from monitoring.series.downsample import Floats, downsample
from monitoring.series.read import merge_gaps, series_read, split_gaps

MAX_RUNS = 50
MIN_WIDTH, MAX_WIDTH = 50, 4000


@dataclass(frozen=True)
class Curve:
    job_id: int
    xs: list[float]  # the finite points
    ys: list[float]
    total: int  # points in the run before downsampling, gaps included
    nonfinite: list[float] = field(default_factory=list)  # xs of NaN or infinite values

    def with_gaps(self) -> tuple[list[float], list[float | None]]:
        """Every point in x order, y None at each gap (`monitoring.series.read`)."""
        return merge_gaps(self.xs, self.ys, self.nonfinite)


def chart_points(width: int) -> int:
    """Points per curve for a chart `width` pixels wide: a min and a max per pixel column."""
    return 2 * min(max(width, MIN_WIDTH), MAX_WIDTH) + 2


@dataclass(frozen=True)
class Axis:
    """How each attempt's xs become the chart's: by step, or through the attempts' clocks."""

    name: str
    times: dict[int, AttemptTimes] | None = None
    starts: dict[int, float] | None = None
    now: float = 0.0

    def xs(self, attempt_id: int, job_id: int, metric: str, xs: Floats) -> Floats | None:
        return on_axis(
            xs,
            name=metric,
            axis=self.name,
            times=(self.times or {}).get(attempt_id),
            start=(self.starts or {}).get(job_id),
            now=self.now,
        )


def axis_for(*, jobs: list[Job], metric: str, axis: str) -> Axis:
    """The axis for these runs' `metric`; unless both are by step, it reads their attempts'
    times (one query)."""
    if axis == STEP and gpu_series(metric) is None:
        return Axis(axis)
    times = attempt_times(job_ids=[job.pk for job in jobs])
    return Axis(axis, times, run_starts(times), timezone.now().timestamp())


def curves_read(*, jobs: Iterable[Job], metric: str, width: int, axis: str = STEP) -> list[Curve]:
    """Each job's `metric`, all its attempts in one curve, downsampled to `width` columns.

    Two queries for any number of runs (the chunks' bounds, then their blobs), and one
    more on a time axis; a compaction between the two makes it read run by run through
    `series_read` instead.
    """
    points = chart_points(width)
    job_list = list(jobs)
    on = axis_for(jobs=job_list, metric=metric, axis=axis)
    for _ in range(READ_TRIES):
        curves = _read_batched(job_list, metric, points, on)
        if curves is not None:
            return curves
    return [_read_one(job.pk, metric, points, on) for job in job_list]


READ_TRIES = 2
# A run is read through its chunks' summaries (each 64-point run's min and max point)
# once each pixel column would hold this many raw points: every drawn point is still a
# real one, and every 64-point run's extremes are among them, so no spike is lost.
POINTS_PER_COLUMN = 8


def _read_batched(jobs: list[Job], metric: str, points: int, axis: Axis) -> list[Curve] | None:
    chunks: dict[int, list[tuple[int, float, float, int]]] = defaultdict(list)
    attempt_of: dict[int, int] = {}
    # The attempts' newest points, still in blocks (monitoring.series.read), raw.
    fresh: dict[int, dict[int, list[tuple[Floats, Floats]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    counted: dict[int, int] = defaultdict(int)
    for chunk_id, job_id, x_min, x_max, count, attempt_id, data in _listing(jobs, metric):
        if data is None:
            chunks[job_id].append((chunk_id, x_min, x_max, count))
            attempt_of[chunk_id] = attempt_id
            continue
        new = unpack(data).points(metric)
        if new is not None:
            fresh[job_id][attempt_id].append(new)
            counted[job_id] += len(new[0])
    raw: set[int] = set()
    summarised: set[int] = set()
    totals = {}
    for job_id, found in chunks.items():
        totals[job_id] = sum(c[3] for c in found)
        if totals[job_id] < POINTS_PER_COLUMN * points // 2:
            raw.update(c[0] for c in found)
            continue
        # The first and the last chunk whole: the curve's ends are exact.
        ends = {min(found, key=lambda c: c[1])[0], max(found, key=lambda c: c[2])[0]}
        for chunk_id, *_ in found:
            (raw if chunk_id in ends else summarised).add(chunk_id)
    wanted = raw | summarised
    blobs = SeriesChunk.objects.filter(id__in=wanted).annotate(
        blob=Case(
            When(id__in=summarised or [0], then=F("summary")),
            default=F("data"),
            output_field=BinaryField(),
        )
    )
    decoded: dict[int, tuple[Floats, Floats]] = {}
    for chunk_id, blob in blobs.values_list("id", "blob"):
        decoded[chunk_id] = decode(blob)
    if len(decoded) != len(wanted):
        return None  # compacted meanwhile: plan again
    curves = []
    for job in jobs:
        by_attempt: dict[int, list[tuple[Floats, Floats]]] = defaultdict(list)
        for chunk in chunks.get(job.pk, []):
            by_attempt[attempt_of[chunk[0]]].append(decoded[chunk[0]])
        for attempt_id, pieces in fresh.get(job.pk, {}).items():
            by_attempt[attempt_id].extend(pieces)
        if counted.get(job.pk):
            totals[job.pk] = totals.get(job.pk, 0) + counted[job.pk]
        parts = {
            attempt_id: (
                np.concatenate([p[0] for p in found]),
                np.concatenate([p[1] for p in found]),
            )
            for attempt_id, found in by_attempt.items()
        }
        curves.append(_curve(job.pk, metric, parts, points, totals.get(job.pk, 0), axis))
    return curves


def _listing(jobs: list[Job], metric: str) -> list[tuple[Any, ...]]:
    """The chunks' bounds (data None) and the attempts' blocks (with data), by job and
    attempt, in one statement: one snapshot of where the points are."""
    job_ids = [job.pk for job in jobs]
    nothing = Value(None, output_field=BinaryField())
    bounds = SeriesChunk.objects.filter(
        series__attempt__job_id__in=job_ids, series__name=metric
    ).values_list(
        "id", "series__attempt__job_id", "x_min", "x_max", "count", "series__attempt_id", nothing
    )
    zero = Value(0.0, output_field=FloatField())
    blocks = SeriesBlock.objects.filter(attempt__job_id__in=job_ids).values_list(
        "id", "attempt__job_id", zero, zero, "count", "attempt_id", "data"
    )
    return list(bounds.union(blocks, all=True))


def _curve(
    job_id: int,
    metric: str,
    parts: dict[int, tuple[Floats, Floats]],
    points: int,
    total: int,
    axis: Axis,
) -> Curve:
    """One run's curve from its attempts' points, on the axis, downsampled."""
    xs_parts, ys_parts = [], []
    for attempt_id, (xs, ys) in parts.items():
        on = axis.xs(attempt_id, job_id, metric, xs)
        if on is not None:
            xs_parts.append(on)
            ys_parts.append(ys)
    if not xs_parts:
        return Curve(job_id, [], [], total)
    down_x, down_y = downsample(np.concatenate(xs_parts), np.concatenate(ys_parts), points)
    finite_xs, finite_ys, gap_xs = split_gaps(down_x, down_y)
    return Curve(job_id, finite_xs.tolist(), finite_ys.tolist(), total, gap_xs.tolist())


def _read_one(job_id: int, metric: str, points: int, axis: Axis) -> Curve:
    """One run read attempt by attempt, each read retried by `series_read` itself."""
    attempts = Attempt.objects.filter(job_id=job_id).order_by("number")
    reads = {
        a: series_read(attempt_id=a, name=metric, max_points=points)
        for a in attempts.values_list("id", flat=True)
    }
    reads = {a: read for a, read in reads.items() if read.total}
    parts = {
        a: (
            np.asarray([*r.xs, *r.nonfinite], dtype=np.float64),
            np.asarray([*r.ys, *[np.nan] * len(r.nonfinite)], dtype=np.float64),
        )
        for a, r in reads.items()
    }
    return _curve(job_id, metric, parts, points, sum(r.total for r in reads.values()), axis)
