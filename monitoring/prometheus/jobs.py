"""The running jobs' series for /metrics: GPUs, pace and MFU, from what the poll stored.

Only attempts Slurm runs now are exported, at most `METRICS_MAX_JOBS` of them (the
oldest started first, so that a job exported once stays exported until it ends),
each with at most its allocated GPUs: the number of series is bounded whatever jobs
print. A job's series vanish from the next scrape once its attempt leaves RUNNING.
Four queries, whatever the number of jobs.
"""

import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.conf import settings
from prometheus_client.core import GaugeMetricFamily, Metric

from jobs.enums import State
from jobs.models import Attempt
from jobs.rundir import GPU_SERIES_PREFIX, gpu_series
from monitoring.hangs.rules import step_interval
from monitoring.models import AttemptProgress
from monitoring.reading.throughput import COMPUTED_MFU, PRINTED_MFU
from monitoring.series.read import last_points

JOB_LABELS = ["job", "attempt", "user", "project", "cluster"]
GPU_LABELS = [*JOB_LABELS, "node", "gpu"]

# The GPU sampler's series (monitoring.ingest.gpu): metric name, help, scale to base units.
GPU_FAMILIES = {
    "utilization": ("portal_job_gpu_utilization_ratio", "GPU utilisation (0-1).", 0.01),
    "memory_used": ("portal_job_gpu_memory_used_bytes", "GPU memory in use.", 1024.0 * 1024.0),
    "power": ("portal_job_gpu_power_watts", "GPU power draw.", 1.0),
    "temperature": ("portal_job_gpu_temperature_celsius", "GPU temperature.", 1.0),
}
# Name, help, labels: one place for what this module serves (the board's test reads it).
JOB_FAMILIES = [
    *((name, text, GPU_LABELS) for name, text, _ in GPU_FAMILIES.values()),
    ("portal_job_gpus", "GPUs the running attempt holds.", JOB_LABELS),
    ("portal_job_start_timestamp_seconds", "When the running attempt started.", JOB_LABELS),
    ("portal_job_step", "The furthest step any rank reached.", JOB_LABELS),
    (
        "portal_job_steps_per_second",
        "Steps per second, from the median of the recent step intervals.",
        JOB_LABELS,
    ),
    ("portal_job_hung", "1 while the attempt is flagged hung or stalled at startup.", JOB_LABELS),
    (
        "portal_job_mfu_ratio",
        "Model FLOP utilisation (0-1) as the portal computes it from tokens/s.",
        JOB_LABELS,
    ),
    (
        "portal_job_mfu_printed",
        "MFU as the trainer prints it (its own unit and peak).",
        JOB_LABELS,
    ),
]


@dataclass
class _Job:
    attempt: Attempt
    labels: list[str]
    gpus: dict[tuple[str, int, str], tuple[float, float]] = field(default_factory=dict)
    mfu: float | None = None
    mfu_printed: bool = False


def running_attempts(*, cap: int) -> list[Attempt]:
    """The running attempts to export, oldest started first (one query)."""
    return list(
        Attempt.objects.filter(state=State.RUNNING)
        .select_related("job", "job__user", "job__project", "job__cluster")
        .order_by("started_at", "id")[:cap]
    )


def _labels(attempt: Attempt) -> list[str]:
    job = attempt.job
    return [
        str(job.pk),
        str(attempt.number),
        job.user.get_username(),
        job.project.slug,
        job.cluster.name,
    ]


def _jobs(attempts: list[Attempt]) -> dict[int, _Job]:
    jobs = {a.pk: _Job(attempt=a, labels=_labels(a)) for a in attempts}
    rows = [
        (attempt_id, name, x, y)
        for attempt_id, points in last_points(attempt_ids=jobs).items()
        for name, (x, y) in points.items()
        if name.startswith(GPU_SERIES_PREFIX) or name in (PRINTED_MFU, COMPUTED_MFU)
    ]
    for attempt_id, name, x, y in rows:
        if name == COMPUTED_MFU:
            jobs[attempt_id].mfu = y
            continue
        if name == PRINTED_MFU:  # the trainer's own: the portal computes none beside it
            jobs[attempt_id].mfu, jobs[attempt_id].mfu_printed = y, True
            continue
        gpu = gpu_series(name)
        if gpu is not None and gpu.metric in GPU_FAMILIES:
            jobs[attempt_id].gpus[(gpu.node, gpu.index, gpu.metric)] = (x, y)
    return jobs


def job_shells() -> dict[str, GaugeMetricFamily]:
    return {
        name: GaugeMetricFamily(name, text, labels=labels) for name, text, labels in JOB_FAMILIES
    }


def job_families(attempts: list[Attempt]) -> Iterator[Metric]:
    """The families of the given running attempts (two queries)."""
    families = job_shells()
    jobs = _jobs(attempts) if attempts else {}
    now = time.time()
    max_age = settings.METRICS_SAMPLE_MAX_AGE
    for job in jobs.values():
        attempt = job.attempt
        families["portal_job_gpus"].add_metric(job.labels, attempt.job.total_gpus)
        if attempt.started_at is not None:
            families["portal_job_start_timestamp_seconds"].add_metric(
                job.labels, attempt.started_at.timestamp()
            )
        for (node, index, metric), (x, y) in sorted(job.gpus.items()):
            if now - x > max_age:
                continue  # the sampler stopped: its last value is not the GPU's now
            name, _, scale = GPU_FAMILIES[metric]
            families[name].add_metric([*job.labels, node, str(index)], y * scale)
        if job.mfu is not None:
            name = "portal_job_mfu_printed" if job.mfu_printed else "portal_job_mfu_ratio"
            families[name].add_metric(job.labels, job.mfu)
    _progress(jobs, families)
    yield from families.values()


def _progress(jobs: dict[int, _Job], families: dict[str, GaugeMetricFamily]) -> None:
    rows = AttemptProgress.objects.filter(attempt_id__in=jobs).values_list(
        "attempt_id", "pace", "verdict"
    )
    by_attempt: dict[int, tuple[list[list[float]], str]] = defaultdict(lambda: ([], ""))
    for attempt_id, pace, verdict in rows:
        by_attempt[attempt_id] = (list(pace or []), verdict)
    for attempt_id, job in jobs.items():
        pace, verdict = by_attempt[attempt_id]
        families["portal_job_hung"].add_metric(job.labels, 1.0 if verdict else 0.0)
        if pace:
            families["portal_job_step"].add_metric(job.labels, float(pace[-1][1]))
        interval = step_interval(pace)
        if interval:
            families["portal_job_steps_per_second"].add_metric(job.labels, 1.0 / interval)
