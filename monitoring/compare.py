"""Runs side by side: one metric of each run downsampled to the chart's width, groups of
runs by a setting with their mean and spread, and the settings that differ.

Each curve is read through `series_read`, which keeps the first and last point and the
minimum and maximum of every x bucket (a one-step spike survives) and reads only chunk
summaries where a bucket spans many points: the server never reads every point of a
long run. A job's attempts are one curve (a restart continues the run).
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from jobs.models import Attempt, Job
from monitoring.downsample import downsample
from monitoring.series import series_read

MAX_RUNS = 50
MIN_WIDTH, MAX_WIDTH = 50, 4000


@dataclass(frozen=True)
class Curve:
    job_id: int
    xs: list[float]
    ys: list[float]
    total: int  # points in the run before downsampling


def chart_points(width: int) -> int:
    """Points per curve for a chart `width` pixels wide: a min and a max per pixel column."""
    return 2 * min(max(width, MIN_WIDTH), MAX_WIDTH) + 2


def curves_read(*, jobs: Iterable[Job], metric: str, width: int) -> list[Curve]:
    """Each job's `metric`, all its attempts in one curve, downsampled to `width` columns."""
    points = chart_points(width)
    job_ids = [job.pk for job in jobs]
    attempts: dict[int, list[int]] = defaultdict(list)
    rows = Attempt.objects.filter(job_id__in=job_ids, series__name=metric).order_by("number")
    for job_id, attempt_id in rows.values_list("job_id", "id"):
        attempts[job_id].append(attempt_id)
    curves = []
    for job_id in job_ids:
        parts = [
            series_read(attempt_id=a, name=metric, max_points=points) for a in attempts[job_id]
        ]
        total = sum(part.total for part in parts)
        xs: list[float] = []
        ys: list[float] = []
        if len(parts) == 1:
            xs, ys = parts[0].xs, parts[0].ys
        elif parts:  # a restarted run: its attempts' curves as one, downsampled again
            merged_x = np.concatenate([np.asarray(p.xs, dtype=np.float64) for p in parts])
            merged_y = np.concatenate([np.asarray(p.ys, dtype=np.float64) for p in parts])
            down_x, down_y = downsample(merged_x, merged_y, points)
            xs, ys = down_x.tolist(), down_y.tolist()
        curves.append(Curve(job_id, xs, ys, total))
    return curves


def group_bands(curves: list[Curve], labels: dict[int, Any], *, width: int) -> list[dict[str, Any]]:
    """Per value of a setting: the mean of its runs on a shared x grid, and mean ± std.

    Each run's downsampled curve is interpolated at the grid (inside its own x range
    only), so runs of different lengths or step spacing still average point by point.
    """
    groups: dict[str, list[Curve]] = defaultdict(list)
    for curve in curves:
        if curve.xs:
            groups[_label(labels.get(curve.job_id))].append(curve)
    out = []
    for label, members in sorted(groups.items()):
        lo = min(c.xs[0] for c in members)
        hi = max(c.xs[-1] for c in members)
        grid = np.linspace(lo, hi, max(min(width, MAX_WIDTH), 2))
        stack = np.full((len(members), len(grid)), np.nan)
        for row, curve in enumerate(members):
            xs = np.asarray(curve.xs, dtype=np.float64)
            ys = np.asarray(curve.ys, dtype=np.float64)
            inside = (grid >= xs[0]) & (grid <= xs[-1])
            stack[row, inside] = np.interp(grid[inside], xs, ys)
        counted = np.sum(~np.isnan(stack), axis=0)
        keep = counted > 0
        mean = np.nanmean(stack[:, keep], axis=0)
        std = np.nanstd(stack[:, keep], axis=0)
        out.append(
            {
                "label": label,
                "runs": [c.job_id for c in members],
                "x": grid[keep].tolist(),
                "mean": mean.tolist(),
                "lo": (mean - std).tolist(),
                "hi": (mean + std).tolist(),
            }
        )
    return out


def _label(value: Any) -> str:
    if value is None:
        return "(not set)"
    return str(value).lower() if isinstance(value, bool) else str(value)


def settings_diff(jobs: list[Job]) -> list[dict[str, Any]]:
    """The settings whose values are not the same in every run (a missing one differs)."""
    keys = sorted({key for job in jobs for key in (job.params or {})})
    rows = []
    for key in keys:
        values = [(job.params or {}).get(key) for job in jobs]
        if any(value != values[0] for value in values) or any(
            key not in (job.params or {}) for job in jobs
        ):
            rows.append({"key": key, "values": values})
    return rows
