"""Downsampling for charts, and the min/max summary a chunk keeps (pure numpy).

A chart gets at most ~2,000 points: the first, the last, and the minimum and
maximum of every x bucket, so no spike is lost.

A stored y is finite or NaN: NaN marks a step whose value was non-finite (a gap on
the chart, `monitoring.series.read`). Minima and maxima are of the finite values
only; each bucket (and each summary run) also keeps its first gap, so a gap survives
downsampling and summaries without a series of NaNs costing more than its buckets.
"""

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
Indices = npt.NDArray[np.int64]

SUMMARY_RUN = 64  # points per min/max pair in a chunk's summary


def downsample(xs: npt.ArrayLike, ys: npt.ArrayLike, max_points: int) -> tuple[Floats, Floats]:
    """At most `max_points` points in x order: the first, the last, and each bucket's
    min and max (and first gap, where there are gaps).

    Buckets are (max_points - 2) // 2 equal slices of the x range, not of the point
    index: a chart maps x linearly to pixels, so an x bucket is a pixel column.  With
    irregular x (GPU samples with gaps) a gap yields empty buckets rather than buckets
    that span it and join samples minutes apart.  A series holding NaN gets
    (max_points - 2) // 3 buckets, room for each bucket's first NaN too.
    """
    xs = np.asarray(xs, dtype=np.float64)
    ys = np.asarray(ys, dtype=np.float64)
    if xs.ndim != 1 or xs.shape != ys.shape:
        raise ValueError("xs and ys must be 1-D arrays of the same length")
    if max_points < 2:
        raise ValueError("max_points must be at least 2 (the first and the last point)")
    if len(xs) > 1 and np.any(xs[1:] < xs[:-1]):
        order = np.argsort(xs, kind="stable")
        xs, ys = xs[order], ys[order]
    n = len(xs)
    if n <= max_points:
        return xs, ys
    gaps = np.isnan(ys)
    has_gaps = bool(gaps.any())
    buckets = (max_points - 2) // (3 if has_gaps else 2)
    keep = [np.array([0, n - 1])]
    if buckets:
        span = xs[-1] - xs[0]
        if span > 0:
            bucket = ((xs - xs[0]) * (buckets / span)).astype(np.int64)
            np.minimum(bucket, buckets - 1, out=bucket)
        else:
            bucket = np.zeros(n, dtype=np.int64)
        keep.extend(bucket_picks(ys, bucket, gaps if has_gaps else None))
    index = np.unique(np.concatenate(keep))
    return xs[index], ys[index]


def bucket_picks(ys: Floats, bucket: Indices, gaps: npt.NDArray[np.bool_] | None) -> list[Indices]:
    """Index of each bucket's first minimum and first maximum of its finite ys, and of its
    first gap (NaN); `bucket` does not decrease, `gaps` is None when there is none."""
    if gaps is None:
        return list(run_extremes(ys, np.flatnonzero(np.diff(bucket, prepend=-1))))
    finite = np.flatnonzero(~gaps)
    missing = np.flatnonzero(gaps)
    picks = [missing[np.diff(bucket[missing], prepend=-1) != 0]]
    if len(finite):
        starts = np.flatnonzero(np.diff(bucket[finite], prepend=-1))
        picks.extend(finite[found] for found in run_extremes(ys[finite], starts))
    return picks


def run_extremes(ys: Floats, starts: Indices) -> tuple[Indices, ...]:
    """Index of the first minimum and of the first maximum of each run `starts` begins."""
    lengths = np.diff(starts, append=len(ys))
    run = np.repeat(np.arange(len(starts)), lengths)
    found = []
    for reduce in (np.minimum, np.maximum):
        hits = np.flatnonzero(ys == np.repeat(reduce.reduceat(ys, starts), lengths))
        found.append(hits[np.diff(run[hits], prepend=-1) != 0])
    return tuple(found)


def summary(xs: Floats, ys: Floats) -> tuple[Floats, Floats]:
    """Each SUMMARY_RUN-point run's first minimum and first maximum (of its finite ys) and
    first gap, in x order (`xs` sorted)."""
    if len(ys) <= 2:
        return xs, ys
    gaps = np.isnan(ys)
    if len(ys) <= SUMMARY_RUN and not gaps.any():  # most appends: skip the per-run machinery
        index = np.unique([int(ys.argmin()), int(ys.argmax())])
        return xs[index], ys[index]
    run = np.arange(len(ys), dtype=np.int64) // SUMMARY_RUN
    index = np.unique(np.concatenate(bucket_picks(ys, run, gaps if gaps.any() else None)))
    return xs[index], ys[index]


def y_bounds(ys: Floats) -> tuple[float, float]:
    """The smallest and largest finite y (a chunk's bounds); NaN, NaN when all are gaps."""
    finite = ys[~np.isnan(ys)]
    if not len(finite):
        return float("nan"), float("nan")
    return float(finite.min()), float(finite.max())
