"""Each run's summary row (RunSummary) and logged settings, kept up to date by the poll.

The runs table reads stored values only: this module folds each poll's new points into
per-series [last, min, max, last x] and the columns derived from them (loss, best eval
metric, throughput, MFU), and writes GPU-hours and duration when an attempt's
efficiency card is made. A few queries per poll, whatever the number of points.
"""

import functools
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import Any

from django.db.models import F, Sum

from jobs.models import Attempt
from jobs.params import ParamValue
from jobs.services import job_params_log
from monitoring.models import EfficiencyCard, RunSummary
from monitoring.reading.kinds import eval_series
from monitoring.reading.throughput import (
    COMPUTED_MFU,
    PRINTED_MFU,
    STEP_RATE_NAMES,
    sample_rate_per_gpu,
    token_rate_per_gpu,
)
from monitoring.series.points import MAX_SERIES_PER_ATTEMPT, Point
from portal_lib.bulk import any_of, bulk_update

LOSS_NAMES = ("loss", "train_loss", "train/loss", "training_loss", "lm_loss")

Stats = list[float]  # [last y, min y, max y, last x]
_FINITE_MAX = sys.float_info.max
_FINITE_MIN = -_FINITE_MAX


def stats_fold(stats: Mapping[str, Stats], points: Iterable[Point]) -> dict[str, Stats]:
    """`stats` with (attempt, name, x, y) points folded in, in arrival order; new names up to
    the cap. A non-finite point (a gap in the series store) is left out of every figure."""
    folded = {name: list(values) for name, values in stats.items()}
    for _, name, x, y in points:  # a thousand jobs' points every poll: comparisons, no calls
        if not (_FINITE_MIN <= y <= _FINITE_MAX and _FINITE_MIN <= x <= _FINITE_MAX):
            continue  # NaN and infinities (strict JSON cannot hold them either)
        current = folded.get(name)
        if current is None:
            if len(folded) >= MAX_SERIES_PER_ATTEMPT:
                continue
            folded[name] = [y, y, y, x]
            continue
        current[0], current[3] = y, x
        if y < current[1]:
            current[1] = y
        if y > current[2]:
            current[2] = y
    return folded


@dataclass(frozen=True)
class _Plan:
    """Which series each derived column is read from: it depends on the names only."""

    loss: str | None
    eval_name: str
    eval_higher: bool
    throughput: str | None
    throughput_unit: str
    mfu: str | None


@functools.lru_cache(maxsize=4096)  # most running jobs log the same few sets of names
def _plan(names: frozenset[str]) -> _Plan:
    loss = next((n for n in LOSS_NAMES if n in names), None)
    evals = sorted(
        (not lower, name) for name in names if (lower := eval_series(name)) is not None
    )  # losses first, then by name: one choice for every run
    higher, eval_name = evals[0] if evals else (False, "")
    throughput, unit = _throughput(names)
    mfu = COMPUTED_MFU if COMPUTED_MFU in names else PRINTED_MFU if PRINTED_MFU in names else None
    return _Plan(loss, eval_name, higher, throughput, unit, mfu)


def summary_columns(stats: Mapping[str, Stats]) -> dict[str, Any]:
    """The derived columns of a summary from its per-series stats."""
    plan = _plan(frozenset(stats))
    loss = stats[plan.loss] if plan.loss is not None else None
    evaluated = stats[plan.eval_name] if plan.eval_name else None
    return {
        "loss_last": loss[0] if loss else None,
        "loss_best": loss[1] if loss else None,
        "eval_name": plan.eval_name,
        "eval_best": (evaluated[2] if plan.eval_higher else evaluated[1]) if evaluated else None,
        "throughput": stats[plan.throughput][0] if plan.throughput is not None else None,
        "throughput_unit": plan.throughput_unit,
        "mfu": stats[plan.mfu][0] if plan.mfu is not None else None,
    }


def _throughput(names: frozenset[str]) -> tuple[str | None, str]:
    """The series of the latest whole-job token rate, else sample rate, else step rate."""
    for unit, classify in (("tokens", token_rate_per_gpu), ("samples", sample_rate_per_gpu)):
        found = sorted(n for n in names if classify(n) is False)
        if found:
            return found[0], unit
    for name in STEP_RATE_NAMES:
        if name in names:
            return name, "steps"
    return None, ""


def runs_record(
    *,
    attempts: Mapping[int, Attempt],
    points: list[Point],
    params: Mapping[int, dict[str, ParamValue]],
) -> None:
    """Fold a poll's stored points and logged settings into the jobs' summaries and tables."""
    by_job: dict[int, list[Point]] = defaultdict(list)
    # Points come attempt after attempt: one look-up per attempt, not per point.
    for attempt_id, attempt_points in groupby(points, itemgetter(0)):
        attempt = attempts.get(attempt_id)
        if attempt is not None:
            by_job[attempt.job_id].extend(attempt_points)
    if by_job:
        _summaries_fold(attempts, by_job)
    for attempt_id, logged in params.items():
        if logged and attempt_id in attempts:
            job_params_log(job_id=attempts[attempt_id].job_id, logged=logged)


def _summaries_fold(attempts: Mapping[int, Attempt], by_job: dict[int, list[Point]]) -> None:
    projects = {a.job_id: a.job.project_id for a in attempts.values()}
    # The stored stats as values, not rows: every running job's summary, every poll.
    stored = dict(
        RunSummary.objects.filter(any_of("job_id", by_job)).values_list("job_id", "metrics")
    )
    changed: list[RunSummary] = []
    created: list[RunSummary] = []
    for job_id, job_points in by_job.items():
        metrics = stats_fold(stored.get(job_id) or {}, job_points)
        summary = RunSummary(
            job_id=job_id, project_id=projects[job_id], metrics=metrics, **summary_columns(metrics)
        )
        (changed if job_id in stored else created).append(summary)
    fields = ["metrics", *summary_columns({}).keys()]
    if created:
        RunSummary.objects.bulk_create(
            created, update_conflicts=True, unique_fields=["job"], update_fields=fields
        )
    # One COPY and one UPDATE (portal_lib.bulk): Django's CASE per row grows with the
    # square of the rows, seconds for a thousand running jobs.
    bulk_update(RunSummary, changed, fields)


def run_summary_finish(*, attempt: Attempt) -> None:
    """GPU-hours (the attempts' efficiency cards) and run time once an attempt has ended."""
    job_id = attempt.job_id
    gpu_hours = EfficiencyCard.objects.filter(attempt__job_id=job_id).aggregate(
        total=Sum("gpu_hours")
    )["total"]
    spans = Attempt.objects.filter(
        job_id=job_id, started_at__isnull=False, ended_at__isnull=False
    ).aggregate(total=Sum(F("ended_at") - F("started_at")))["total"]
    duration = spans.total_seconds() if spans is not None else None
    RunSummary.objects.update_or_create(
        job_id=job_id,
        defaults={"gpu_hours": gpu_hours, "duration_seconds": duration},
        create_defaults={
            "project_id": attempt.job.project_id,
            "gpu_hours": gpu_hours,
            "duration_seconds": duration,
        },
    )
