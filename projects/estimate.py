"""What a job would cost and whether the project's budget has room for it (read only)."""

from dataclasses import dataclass
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

from clusters.models import Cluster
from jobs.specs import JobSpec
from projects.models import Project, Quota
from projects.periods import period_words
from projects.selectors import Usage, held_gpus, project_usage

HOURS = Decimal("0.01")
MONEY = Decimal("0.01")


@dataclass(frozen=True)
class Estimate:
    gpus: int
    gpu_hours: Decimal
    cost: Decimal
    left_before: Decimal
    left_after: Decimal
    fits: bool
    message: str


def gpu_hours_for(*, gpus: int, time_limit: timedelta) -> Decimal:
    """GPUs x the time limit in hours: what a submission reserves."""
    seconds = Decimal(int(time_limit.total_seconds()))
    return (gpus * seconds / 3600).quantize(Decimal("0.0001"), ROUND_HALF_UP)


def spec_gpu_hours(spec: JobSpec) -> Decimal:
    return gpu_hours_for(gpus=spec.nodes * spec.gpus_per_node, time_limit=spec.time_limit)


def fmt_hours(value: Decimal) -> str:
    """12.5, 64, 0.17: GPU-hours the way a person writes them."""
    text = f"{value.quantize(HOURS, ROUND_HALF_UP):f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def budget_refusal(*, project: Project, needed: Decimal, usage: Usage) -> str:
    if not usage.has_quota:
        return f"Project {project.slug} has no GPU-hour budget yet: ask an admin to set its quota."
    return (
        f"needs {fmt_hours(needed)} GPU-h, {fmt_hours(max(usage.left_gpu_hours, Decimal(0)))} "
        f"GPU-h left {period_words(usage.period)} in project {project.slug}"
    )


def concurrency_refusal(*, project: Project, gpus: int, held: int, limit: int) -> str:
    return (
        f"needs {gpus} GPUs, {max(limit - held, 0)} of {limit} concurrent GPUs free in project "
        f"{project.slug}: wait for a running job to end or ask for fewer GPUs"
    )


def job_estimate(*, project: Project, cluster: Cluster, spec: JobSpec) -> Estimate:
    """The job's GPU-hours and cost, and what the budget has left before and after it."""
    gpu_hours = spec_gpu_hours(spec)
    usage = project_usage(project=project)
    left_after = usage.left_gpu_hours - gpu_hours
    gpus = spec.nodes * spec.gpus_per_node
    fits = usage.has_quota and left_after >= 0
    message = "" if fits else budget_refusal(project=project, needed=gpu_hours, usage=usage)
    limit = Quota.objects.filter(project=project).values_list("max_concurrent_gpus", flat=True)
    max_gpus = limit.first() if fits else None
    if max_gpus is not None:
        held = held_gpus(project_id=project.pk)
        if held + gpus > max_gpus:
            fits = False
            message = concurrency_refusal(project=project, gpus=gpus, held=held, limit=max_gpus)
    return Estimate(
        gpus=gpus,
        gpu_hours=gpu_hours,
        cost=(gpu_hours * cluster.price_per_gpu_hour).quantize(MONEY, ROUND_HALF_UP),
        left_before=usage.left_gpu_hours,
        left_after=left_after,
        fits=fits,
        message=message,
    )
