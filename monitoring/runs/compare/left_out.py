"""Which of the chosen runs a compare chart does not draw, and why: never a silent drop.

A run is left out when the user may not see it (the URL named another project's run, or one
that is gone: the two read alike, so that a URL cannot probe for runs), when the chart's
runs are more than MAX_RUNS, when it has no points yet, when it has points but none of the
chart's series (it says which series it has, so that the user can pick one of those), when
every value of the series is NaN or infinite, or when its steps have no times on a time axis.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from jobs.models import Job
from monitoring.runs.compare.curves import Curve

NOT_VISIBLE, OVER_LIMIT, NO_POINTS, NO_SERIES, ALL_GAPS, NO_CLOCK = (
    "not_visible",
    "over_limit",
    "no_points",
    "no_series",
    "all_gaps",
    "no_clock",
)
NAMED_SERIES = 6  # a run's series named in its note; "and N more" past these


@dataclass(frozen=True)
class LeftOut:
    id: int
    name: str  # "" for a run the user may not see: not theirs to read
    why: str  # one of the reasons above
    text: str  # what the page says


def left_out(
    *,
    asked: Sequence[int],
    limit: int,
    jobs: Sequence[Job],
    curves: Sequence[Curve],
    metric: str,
    logged: Mapping[int, Sequence[str]],
    by_time: bool,
) -> list[LeftOut]:
    """The runs of `asked` (the URL's ids, in order) that `curves` does not draw; `logged`
    holds each run's series names, `by_time` whether the x axis is a time."""
    found = {job.pk: job for job in jobs}
    drawn = {curve.job_id: curve for curve in curves}
    out = []
    for position, run_id in enumerate(asked):
        job = found.get(run_id)
        if position >= limit:
            out.append(
                LeftOut(run_id, "", OVER_LIMIT, f"#{run_id}: compare draws at most {limit} runs.")
            )
        elif job is None:
            out.append(
                LeftOut(
                    run_id, "", NOT_VISIBLE, f"#{run_id}: no run of this project that you may see."
                )
            )
        elif (curve := drawn.get(run_id)) is not None and not curve.xs:
            out.append(_why(job, curve, metric, logged.get(run_id, ()), by_time))
    return out


def _why(job: Job, curve: Curve, metric: str, logged: Sequence[str], by_time: bool) -> LeftOut:
    named = f"{job.name} #{job.pk}"
    if curve.nonfinite:
        return LeftOut(
            job.pk,
            job.name,
            ALL_GAPS,
            f"{named}: every “{metric}” value is NaN or infinite ({curve.total:,}).",
        )
    if curve.total and by_time:
        return LeftOut(
            job.pk,
            job.name,
            NO_CLOCK,
            f"{named}: its steps have no times yet (no attempt has started), so it has no"
            " place on a time axis.",
        )
    others = [name for name in logged if name != metric]
    if curve.total or not others:
        return LeftOut(job.pk, job.name, NO_POINTS, f"{named} has logged no points yet.")
    listed = ", ".join(others[:NAMED_SERIES])
    more = f" and {len(others) - NAMED_SERIES} more" if len(others) > NAMED_SERIES else ""
    return LeftOut(
        job.pk, job.name, NO_SERIES, f"{named} has no “{metric}” series (it logs {listed}{more})."
    )
