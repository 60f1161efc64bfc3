"""Each run's summary row (RunSummary) and logged settings, kept up to date by the poll.

The runs table reads stored values only: this module folds each poll's new points into
per-series [last, min, max, last x] and the columns derived from them (loss, best eval
metric, throughput, MFU), and writes GPU-hours and duration when an attempt's
efficiency card is made. A few queries per poll, whatever the number of points.
"""

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import F, Sum

from jobs.models import Attempt, Job
from jobs.params import SOURCE_LOGGED, ParamValue, params_merge
from monitoring.ingest_parse import MAX_SERIES_PER_ATTEMPT, Point
from monitoring.models import EfficiencyCard, RunSummary
from monitoring.throughput import (
    COMPUTED_MFU,
    PRINTED_MFU,
    STEP_RATE_NAMES,
    sample_rate_per_gpu,
    token_rate_per_gpu,
)
from portal_lib.bulk import bulk_update

LOSS_NAMES = ("loss", "train_loss", "train/loss", "training_loss", "lm_loss")
_EVAL_PREFIXES = ("eval", "val", "valid", "validation", "test")
_LOWER_IS_BETTER = ("loss", "ppl", "perplexity", "error", "err", "wer", "cer")

Stats = list[float]  # [last y, min y, max y, last x]


def stats_fold(
    stats: Mapping[str, Stats], points: Iterable[tuple[str, float, float]]
) -> dict[str, Stats]:
    """`stats` with (name, x, y) points folded in, in arrival order; new names up to the cap."""
    folded = {name: list(values) for name, values in stats.items()}
    for name, x, y in points:
        current = folded.get(name)
        if current is None:
            if len(folded) >= MAX_SERIES_PER_ATTEMPT:
                continue
            folded[name] = [y, y, y, x]
            continue
        current[0], current[3] = y, x
        current[1] = min(current[1], y)
        current[2] = max(current[2], y)
    return folded


@functools.lru_cache(maxsize=8192)  # every series name of every running job, every poll
def eval_series(name: str) -> bool | None:
    """None: not an evaluation metric; else whether lower is better (eval_loss, val/acc)."""
    lowered = name.lower()
    head, _, rest = lowered.replace("/", "_").partition("_")
    if head not in _EVAL_PREFIXES or not rest:
        return None
    return any(word in rest.split("_") or rest.endswith(word) for word in _LOWER_IS_BETTER)


def summary_columns(stats: Mapping[str, Stats]) -> dict[str, Any]:
    """The derived columns of a summary from its per-series stats."""
    columns: dict[str, Any] = {"loss_last": None, "loss_best": None}
    loss = next((stats[n] for n in LOSS_NAMES if n in stats), None)
    if loss is not None:
        columns["loss_last"], columns["loss_best"] = loss[0], loss[1]
    evals = sorted(
        (not lower, name) for name in stats if (lower := eval_series(name)) is not None
    )  # losses first, then by name: one choice for every run
    columns["eval_name"], columns["eval_best"] = "", None
    if evals:
        higher, name = evals[0]
        columns["eval_name"] = name
        columns["eval_best"] = stats[name][2] if higher else stats[name][1]
    columns["throughput"], columns["throughput_unit"] = _throughput(stats)
    mfu = stats.get(COMPUTED_MFU) or stats.get(PRINTED_MFU)
    columns["mfu"] = mfu[0] if mfu else None
    return columns


def _throughput(stats: Mapping[str, Stats]) -> tuple[float | None, str]:
    """The latest whole-job token rate, else sample rate, else step rate."""
    for unit, classify in (("tokens", token_rate_per_gpu), ("samples", sample_rate_per_gpu)):
        names = sorted(n for n in stats if classify(n) is False)
        if names:
            return stats[names[0]][0], unit
    for name in STEP_RATE_NAMES:
        if name in stats:
            return stats[name][0], "steps"
    return None, ""


def runs_record(
    *,
    attempts: Mapping[int, Attempt],
    points: list[Point],
    params: Mapping[int, dict[str, ParamValue]],
) -> None:
    """Fold a poll's stored points and logged settings into the jobs' summaries and tables."""
    by_job: dict[int, list[tuple[str, float, float]]] = defaultdict(list)
    for attempt_id, name, x, y in points:
        attempt = attempts.get(attempt_id)
        if attempt is not None:
            by_job[attempt.job_id].append((name, x, y))
    if by_job:
        _summaries_fold(attempts, by_job)
    for attempt_id, logged in params.items():
        if logged and attempt_id in attempts:
            job_params_log(job_id=attempts[attempt_id].job_id, logged=logged)


def _summaries_fold(
    attempts: Mapping[int, Attempt], by_job: dict[int, list[tuple[str, float, float]]]
) -> None:
    projects = {a.job_id: a.job.project_id for a in attempts.values()}
    existing = {s.job_id: s for s in RunSummary.objects.filter(job_id__in=list(by_job))}
    changed, created = [], []
    for job_id, job_points in by_job.items():
        summary = existing.get(job_id)
        if summary is None:
            summary = RunSummary(job_id=job_id, project_id=projects[job_id])
            created.append(summary)
        else:
            changed.append(summary)
        summary.metrics = stats_fold(summary.metrics or {}, job_points)
        for column, value in summary_columns(summary.metrics).items():
            setattr(summary, column, value)
    fields = ["metrics", *summary_columns({}).keys()]
    if created:
        RunSummary.objects.bulk_create(
            created, update_conflicts=True, unique_fields=["job"], update_fields=fields
        )
    # One COPY and one UPDATE (portal_lib.bulk): Django's CASE per row grows with the
    # square of the rows, seconds for a thousand running jobs.
    bulk_update(RunSummary, changed, fields)


def job_params_log(*, job_id: int, logged: Mapping[str, ParamValue]) -> None:
    """Lay settings the run logged over the job's table (the run says what really ran)."""
    job = Job.objects.select_for_update().only("params", "param_sources").get(pk=job_id)
    params, sources = params_merge(job.params or {}, job.param_sources or {}, logged, SOURCE_LOGGED)
    if params != job.params or sources != job.param_sources:
        Job.objects.filter(pk=job_id).update(params=params, param_sources=sources)


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
