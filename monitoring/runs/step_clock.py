"""The compare chart's x axes: step, time since the run's start, or wall-clock time.

The poll stores a training metric's points by step only (monitoring.series.read keeps no
wall time per point), so each attempt's clock, step to Unix time, is estimated from the
times the portal does keep: its start (at the first step drawn), the furthest rank's
recent (time, step) samples (AttemptProgress.pace, kept for hang detection) and its end
(at the highest step its files gave, LogFile.last_step; a running attempt's is now,
unless its pace reached that step). Between two of them the pace is taken as constant.
GPU series are by time already: for the step axis they go through the clock backwards
(from step 0 at the attempt's start).
"""

from dataclasses import dataclass

import numpy as np
from django.db.models import Max, OuterRef, Subquery

from jobs.models import Attempt
from jobs.rundir import gpu_series
from monitoring.models import LogFile
from monitoring.series.downsample import Floats

STEP, ELAPSED, WALL = "step", "elapsed", "wall"
AXIS_TITLES = {STEP: "step", ELAPSED: "time since the run's start", WALL: "wall-clock time"}
AXES = tuple(AXIS_TITLES)


@dataclass(frozen=True)
class AttemptTimes:
    """What the portal keeps of an attempt's times (Unix seconds) and steps."""

    job_id: int
    started: float | None
    ended: float | None
    last_step: float | None  # the highest step its files gave
    pace: tuple[tuple[float, float], ...]  # (time, step), oldest first


def attempt_times(*, job_ids: list[int]) -> dict[int, AttemptTimes]:
    """The jobs' attempts' times, by attempt id; one query."""
    top = (
        LogFile.objects.filter(attempt=OuterRef("pk"))
        .values("attempt")
        .annotate(top=Max("last_step"))
        .values("top")
    )
    rows = (
        Attempt.objects.filter(job_id__in=job_ids)
        .annotate(top_step=Subquery(top))
        .values_list("id", "job_id", "started_at", "ended_at", "top_step", "progress__pace")
    )
    return {
        attempt_id: AttemptTimes(
            job_id=job_id,
            started=started.timestamp() if started else None,
            ended=ended.timestamp() if ended else None,
            last_step=float(top_step) if top_step is not None else None,
            pace=tuple((float(t), float(s)) for t, s in (pace or [])),
        )
        for attempt_id, job_id, started, ended, top_step, pace in rows
    }


def run_starts(times: dict[int, AttemptTimes]) -> dict[int, float]:
    """Each job's start: its first attempt's."""
    starts: dict[int, float] = {}
    for found in times.values():
        if found.started is not None:
            starts[found.job_id] = min(starts.get(found.job_id, found.started), found.started)
    return starts


@dataclass(frozen=True)
class Clock:
    """Piecewise linear: steps strictly increasing, times non-decreasing."""

    steps: Floats
    times: Floats

    def times_at(self, steps: Floats) -> Floats:
        return np.interp(steps, self.steps, self.times)

    def steps_at(self, times: Floats) -> Floats:
        # Equal times (a stall) would make the inverse ambiguous: the first step wins.
        keep = np.concatenate(([True], np.diff(self.times) > 0))
        return np.interp(times, self.times[keep], self.steps[keep])


def attempt_clock(
    times: AttemptTimes, *, first_step: float, last_step: float, now: float
) -> Clock | None:
    """The attempt's estimated clock over [first_step, last_step]; None if it never started."""
    if times.started is None:
        return None
    top = max(last_step, times.last_step if times.last_step is not None else last_step)
    anchors = [(times.started, first_step), *times.pace]
    paced = bool(times.pace) and max(s for _, s in times.pace) >= top
    if times.ended is not None or not paced:
        anchors.append((times.ended if times.ended is not None else now, top))
    anchors.sort()
    steps: list[float] = []
    stamps: list[float] = []
    for stamp, step in anchors:
        if stamp < times.started or (steps and step <= steps[-1]):
            continue  # only anchors that move the run forward
        steps.append(step)
        stamps.append(stamp)
    return Clock(np.asarray(steps, dtype=np.float64), np.asarray(stamps, dtype=np.float64))


def on_axis(
    xs: Floats,
    *,
    name: str,
    axis: str,
    times: AttemptTimes | None,
    start: float | None,
    now: float,
) -> Floats | None:
    """One attempt's xs of series `name` on `axis`; None where its time is not known."""
    by_time = gpu_series(name) is not None
    if axis == STEP and not by_time:
        return xs
    if times is None or start is None or not len(xs):
        return None
    if by_time and axis != STEP:
        return xs - start if axis == ELAPSED else xs
    if by_time:
        first = 0.0  # where its first step is not known (a resumed attempt's is later)
        clock = attempt_clock(times, first_step=first, last_step=times.last_step or first, now=now)
        return None if clock is None else clock.steps_at(xs)
    clock = attempt_clock(times, first_step=float(xs.min()), last_step=float(xs.max()), now=now)
    if clock is None:
        return None
    stamps = clock.times_at(xs)
    return stamps - start if axis == ELAPSED else stamps
