"""Downsampling for charts, and the min/max summary a chunk keeps (pure numpy).

A chart gets at most ~2,000 points: the first, the last, and the minimum and
maximum of every x bucket, so no spike is lost.
"""

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]

SUMMARY_RUN = 64  # points per min/max pair in a chunk's summary


def downsample(xs: npt.ArrayLike, ys: npt.ArrayLike, max_points: int) -> tuple[Floats, Floats]:
    """At most `max_points` points in x order: the first, the last, and each bucket's
    min and max.

    Buckets are (max_points - 2) // 2 equal slices of the x range, not of the point
    index: a chart maps x linearly to pixels, so an x bucket is a pixel column.  With
    irregular x (GPU samples with gaps) a gap yields empty buckets rather than buckets
    that span it and join samples minutes apart.  Ys must be finite.
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
    buckets = (max_points - 2) // 2
    keep = [np.array([0, n - 1])]
    if buckets:
        span = xs[-1] - xs[0]
        if span > 0:
            bucket = ((xs - xs[0]) * (buckets / span)).astype(np.int64)
            np.minimum(bucket, buckets - 1, out=bucket)
        else:
            bucket = np.zeros(n, dtype=np.int64)
        starts = np.flatnonzero(np.diff(bucket, prepend=-1))
        keep.extend(run_extremes(ys, starts))
    index = np.unique(np.concatenate(keep))
    return xs[index], ys[index]


def run_extremes(ys: Floats, starts: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
    """Index of the first minimum and of the first maximum of each run `starts` begins."""
    lengths = np.diff(starts, append=len(ys))
    run = np.repeat(np.arange(len(starts)), lengths)
    found = []
    for reduce in (np.minimum, np.maximum):
        hits = np.flatnonzero(ys == np.repeat(reduce.reduceat(ys, starts), lengths))
        found.append(hits[np.diff(run[hits], prepend=-1) != 0])
    return tuple(found)


def summary(xs: Floats, ys: Floats) -> tuple[Floats, Floats]:
    if len(ys) <= 2:
        return xs, ys
    if len(ys) <= SUMMARY_RUN:  # most appends: skip the per-run machinery
        index = np.unique([int(ys.argmin()), int(ys.argmax())])
        return xs[index], ys[index]
    lows, highs = run_extremes(ys, np.arange(0, len(ys), SUMMARY_RUN))
    index = np.unique(np.concatenate((lows, highs)))
    return xs[index], ys[index]
