"""The quota rules, in one place: what a request may ask of its project's quota.

Pure functions of plain values: the caller passes the request, the quota row,
and what the project holds and has used. The spec check (per-job limits), the
estimate (room left) and the reservation (all of them) ask the same rules.
"""

from dataclasses import dataclass
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

from clusters.models import Cluster
from portal_lib.errors import PortalError
from projects.models import Project, Quota
from projects.periods import period_words
from projects.selectors import Usage

HOURS = Decimal("0.01")


class QuotaRefusal(PortalError):
    """The project's quota does not allow the request; the message names limit and request."""

    code = "quota_refused"


@dataclass(frozen=True)
class QuotaRequest:
    """What a submission asks of its project: where it runs, how big, how long."""

    project: Project
    cluster: Cluster
    partition: str  # "" for the cluster's default partition
    gpus: int
    cpus: int
    time_limit: timedelta

    @property
    def gpu_hours(self) -> Decimal:
        return gpu_hours_for(gpus=self.gpus, time_limit=self.time_limit)


def gpu_hours_for(*, gpus: int, time_limit: timedelta) -> Decimal:
    """GPUs x the time limit in hours: what a submission reserves."""
    seconds = Decimal(int(time_limit.total_seconds()))
    return (gpus * seconds / 3600).quantize(Decimal("0.0001"), ROUND_HALF_UP)


def fmt_hours(value: Decimal) -> str:
    """12.5, 64, 0.17: GPU-hours the way a person writes them."""
    text = f"{value.quantize(HOURS, ROUND_HALF_UP):f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def describe(limit: timedelta) -> str:
    """A time limit the way a refusal says it: '12 h', '3 days'."""
    hours = limit.total_seconds() / 3600
    return f"{hours:g} h" if hours < 48 else f"{hours / 24:g} days"


def no_budget_refusal(project: Project) -> str:
    return f"Project {project.slug} has no GPU-hour budget yet: ask an admin to set its quota."


def budget_refusal(*, project: Project, needed: Decimal, usage: Usage) -> str:
    if not usage.has_quota:
        return no_budget_refusal(project)
    return (
        f"needs {fmt_hours(needed)} GPU-h, {fmt_hours(max(usage.left_gpu_hours, Decimal(0)))} "
        f"GPU-h left {period_words(usage.period)} in project {project.slug}"
    )


def concurrency_refusal(*, project: Project, gpus: int, held: int, limit: int) -> str:
    return (
        f"needs {gpus} GPUs, {max(limit - held, 0)} of {limit} concurrent GPUs free in project "
        f"{project.slug}: wait for a running job to end or ask for fewer GPUs"
    )


def limit_errors(*, gpus: int, time_limit: timedelta, quota: Quota) -> dict[str, list[str]]:
    """The per-job limits (GPUs, wall time), by the spec field that breaks them."""
    errors: dict[str, list[str]] = {}
    if quota.max_gpus_per_job is not None and gpus > quota.max_gpus_per_job:
        errors["gpus_per_node"] = [
            f"This job asks for {gpus} GPUs; the project allows at most "
            f"{quota.max_gpus_per_job} per job."
        ]
    if time_limit > quota.max_wall_time:
        errors["time_limit"] = [
            f"The project allows at most {describe(quota.max_wall_time)} per job; "
            "shorten the time limit."
        ]
    return errors


def scope_refusal(
    *, request: QuotaRequest, quota: Quota, allowed_clusters: dict[int, str]
) -> QuotaRefusal | None:
    """Where the project may run: `allowed_clusters` (id to name) empty allows every cluster."""
    project, cluster = request.project, request.cluster
    if allowed_clusters and cluster.pk not in allowed_clusters:
        names = ", ".join(sorted(allowed_clusters.values()))
        return QuotaRefusal(
            f"Project {project.slug} may not use cluster {cluster.name}; choose one of: {names}.",
            errors={"cluster": [f"Choose one of: {names}."]},
        )
    partitions = quota.partition_names()
    partition = request.partition or cluster.default_partition
    if partitions and partition not in partitions:
        wanted = f"partition {partition}" if partition else "the default partition"
        return QuotaRefusal(
            f"Project {project.slug} may not use {wanted}; choose one of: {', '.join(partitions)}.",
            errors={"partition": [f"Choose one of: {', '.join(partitions)}."]},
        )
    return None


def room_refusal(*, request: QuotaRequest, quota: Quota | None, held: int, usage: Usage) -> str:
    """Whether the project has room now (concurrent GPUs, then GPU-hours); empty if it has."""
    if quota is None:
        return no_budget_refusal(request.project)
    limit = quota.max_concurrent_gpus
    if limit is not None and held + request.gpus > limit:
        return concurrency_refusal(
            project=request.project, gpus=request.gpus, held=held, limit=limit
        )
    if not usage.has_quota or request.gpu_hours > usage.left_gpu_hours:
        return budget_refusal(project=request.project, needed=request.gpu_hours, usage=usage)
    return ""


def quota_refusal(
    *,
    request: QuotaRequest,
    quota: Quota | None,
    allowed_clusters: dict[int, str],
    held: int,
    usage: Usage,
) -> QuotaRefusal | None:
    """Every rule a reservation must pass, in order; None when the request fits."""
    if quota is None:
        return QuotaRefusal(no_budget_refusal(request.project))
    scope = scope_refusal(request=request, quota=quota, allowed_clusters=allowed_clusters)
    if scope is not None:
        return scope
    errors = limit_errors(gpus=request.gpus, time_limit=request.time_limit, quota=quota)
    if errors:
        return QuotaRefusal(next(iter(errors.values()))[0], errors=errors)
    room = room_refusal(request=request, quota=quota, held=held, usage=usage)
    return QuotaRefusal(room) if room else None
