"""The compare chart's data in one answer: each run's curve, the y axis' title and default
range, the group bands, and the runs left out with why. One place to add to: a new
part of the chart (a run's lineage, say) is one more key here, read in the same few queries."""

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from jobs.models import Job
from monitoring.runs.compare.bands import group_bands, y_range
from monitoring.runs.compare.curves import curves_read
from monitoring.runs.compare.left_out import left_out
from monitoring.runs.compare.series import logged_series
from monitoring.runs.compare.units import series_unit, y_title
from monitoring.runs.step_clock import STEP

# Compare's "group by" for the runs' own group (their notes), not a setting: no setting's
# name starts with "@" (jobs.params).
RUN_GROUP = "@group"


def compare_chart(
    *,
    asked: Sequence[int],
    limit: int,
    jobs: Sequence[Job],
    metric: str,
    width: int,
    axis: str = STEP,
    group: str = "",
) -> dict[str, Any]:
    """What the compare chart draws of `jobs` (the visible ones of `asked`, the URL's ids):
    a JSON-ready dict. Its queries do not grow with the number of runs."""
    curves = curves_read(jobs=jobs, metric=metric, width=width, axis=axis)
    names = {job.pk: job.name for job in jobs}
    runs = []
    for c in curves:
        if not c.xs:
            continue  # left out, and said so below
        xs, ys = c.with_gaps()  # y null where the value was NaN or infinite
        runs.append(
            {
                "id": c.job_id,
                "name": names[c.job_id],
                "x": xs,
                "y": ys,
                "nonfinite": c.nonfinite,
                "total": c.total,
            }
        )
    fitted = y_range(curves)
    logged = logged_series(job_ids=[job.pk for job in jobs])
    omitted = left_out(
        asked=asked,
        limit=limit,
        jobs=jobs,
        curves=curves,
        metric=metric,
        logged=logged,
        by_time=axis != STEP,
    )
    body: dict[str, Any] = {
        "metric": metric,
        "unit": series_unit(metric),
        "y_title": y_title(metric),
        "axis": axis,
        "runs": runs,
        # The default y range when a run is orders of magnitude off the others; null: autorange.
        "y_range": None
        if fitted is None
        else {
            "range": [fitted.low, fitted.high],
            "off": [{"id": job, "name": names[job], "value": v} for job, v in fitted.off],
        },
        "left_out": [asdict(run) for run in omitted],
    }
    if group:
        labels = {job.pk: group_label(job, group) for job in jobs}
        body["groups"] = group_bands(curves, labels, width=width)
    return body


def group_label(job: Job, group: str) -> Any:
    """The run's value for compare's grouping: a setting's, or its own group (a run without
    one stands alone, named, rather than being averaged with the other loose runs)."""
    if group == RUN_GROUP:
        return job.group or f"{job.name} #{job.pk}"
    return (job.params or {}).get(group)
