"""The compare chart's default y range beside a run orders of magnitude off the others, the
group bands (mean and ± 1 std of each group's runs), and the settings that differ."""

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from jobs.models import Job
from monitoring.runs.compare.curves import MAX_WIDTH, Curve

# A run whose largest |y| is this many times the runs' typical largest |y| (the lower
# median) is off the chart's default range: three orders of magnitude, a diverged run.
OFF_FACTOR = 1000.0
RANGE_PAD = 0.05  # of the fitted span, above and below


@dataclass(frozen=True)
class YRange:
    """The y range a compare chart starts at, fitted to the runs that are not off by orders
    of magnitude; `off` names the others (job id, its extreme value)."""

    low: float
    high: float
    off: list[tuple[int, float]]


def y_range(curves: list[Curve]) -> YRange | None:
    """None when every run fits (the chart's own autorange is right), or fewer than two runs
    have values: one run alone has nothing to be off from (the log axis shows it whole)."""
    drawn = [c for c in curves if c.ys]
    if len(drawn) < 2:
        return None
    extremes = {c.job_id: max(c.ys, key=abs) for c in drawn}
    magnitudes = sorted(abs(v) for v in extremes.values())
    typical = magnitudes[(len(magnitudes) - 1) // 2]
    if typical == 0.0:
        return None
    off = [(job, value) for job, value in extremes.items() if abs(value) > OFF_FACTOR * typical]
    if not off:
        return None
    off_ids = {job for job, _ in off}
    kept = [y for c in drawn if c.job_id not in off_ids for y in c.ys]
    low, high = min(kept), max(kept)
    pad = (high - low) * RANGE_PAD or abs(high) * RANGE_PAD or 1.0
    return YRange(low - pad, high + pad, off)


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
