"""The quota rules, in one place: what a request may ask of its project's quota.

Pure functions of plain values: the caller passes the request, the quota row,
and what the project holds and has used. The spec check (per-job limits), the
estimate (room left) and the reservation (all of them) ask the same rules.
"""

from dataclasses import dataclass
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Protocol

from clusters.models import Cluster
from portal_lib.errors import PortalError
from projects.models import Project, Quota
from projects.periods import period_words
from projects.selectors import Held, Meter, Usage

HOURS = Decimal("0.01")


class QuotaRefusal(PortalError):
    """The project's quota does not allow the request; the message names limit and request."""

    code = "quota_refused"


class QuotaFull(QuotaRefusal):
    """Only the concurrency limits refuse the request now: it fits once a job ends.

    Everything else (scope, per-job limits, budgets) allows it, so a caller may let it wait.
    """

    code = "quota_full"


@dataclass(frozen=True)
class QuotaRequest:
    """What a submission asks of its project: where it runs, how big, how long."""

    project: Project
    cluster: Cluster
    partition: str  # "" for the cluster's default partition
    gpus: int  # all nodes' together
    cpus: int  # all nodes' together
    time_limit: timedelta
    nodes: int = 1

    @property
    def gpu_hours(self) -> Decimal:
        return hours_for(count=self.gpus, time_limit=self.time_limit)

    @property
    def cpu_hours(self) -> Decimal:
        return hours_for(count=self.cpus, time_limit=self.time_limit)

    @property
    def node_hours(self) -> Decimal:
        return hours_for(count=self.nodes, time_limit=self.time_limit)


def hours_for(*, count: int, time_limit: timedelta) -> Decimal:
    """GPUs (CPUs, nodes) x the time limit in hours: what a submission reserves."""
    seconds = Decimal(int(time_limit.total_seconds()))
    return (count * seconds / 3600).quantize(Decimal("0.0001"), ROUND_HALF_UP)


def gpu_hours_for(*, gpus: int, time_limit: timedelta) -> Decimal:
    return hours_for(count=gpus, time_limit=time_limit)


class Prices(Protocol):
    """A cluster's prices (a Cluster, or the Payer a charge is made for)."""

    @property
    def price_per_gpu_hour(self) -> Decimal: ...

    @property
    def price_per_cpu_hour(self) -> Decimal: ...


def price_of(*, gpu_hours: Decimal, cpu_hours: Decimal, prices: Prices) -> Decimal:
    """What GPU- and CPU-hours cost (unrounded): the estimate, a plan and a charge alike."""
    return gpu_hours * prices.price_per_gpu_hour + cpu_hours * prices.price_per_cpu_hour


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


def meter_refusal(
    *, project: Project, needed: Decimal, meter: Meter, unit: str, period: str
) -> str:
    """A CPU- or node-hour budget without room for `needed`; empty when it has room."""
    left = meter.left
    if left is None or needed <= left:
        return ""
    return (
        f"needs {fmt_hours(needed)} {unit}, {fmt_hours(max(left, Decimal(0)))} {unit} left "
        f"{period_words(period)} in project {project.slug}"
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


def budget_verdict(*, request: QuotaRequest, quota: Quota | None, usage: Usage) -> str:
    """Whether the GPU-, CPU- and node-hour budgets have room for the request; empty if so."""
    if quota is None:
        return no_budget_refusal(request.project)
    project = request.project
    if not usage.has_quota or request.gpu_hours > usage.left_gpu_hours:
        return budget_refusal(project=project, needed=request.gpu_hours, usage=usage)
    for needed, meter, unit in (
        (request.cpu_hours, usage.cpu, "CPU-h"),
        (request.node_hours, usage.node, "node-h"),
    ):
        refusal = meter_refusal(
            project=project, needed=needed, meter=meter, unit=unit, period=usage.period
        )
        if refusal:
            return refusal
    return ""


def never_fits(*, request: QuotaRequest, quota: Quota) -> str:
    """A request the concurrency limits refuse even with the project empty; empty if it fits."""
    limit = quota.max_concurrent_gpus
    if limit is not None and request.gpus > limit:
        return (
            f"needs {request.gpus} GPUs, more than the {limit} concurrent GPUs project "
            f"{request.project.slug} allows at once: ask for at most {limit} GPUs"
        )
    if quota.max_concurrent_jobs is not None and quota.max_concurrent_jobs < 1:
        return f"project {request.project.slug} allows no queued or running jobs"
    return ""


def concurrency_verdict(*, request: QuotaRequest, quota: Quota, held: Held) -> str:
    """Why the concurrent-jobs or concurrent-GPUs limit has no room now; empty if it has.

    Plain words for a job that waits: 'project vision has 4 of its 4 concurrent GPUs in
    use and this job needs 1'.
    """
    slug = request.project.slug
    jobs = quota.max_concurrent_jobs
    if jobs is not None and held.jobs + 1 > jobs:
        return f"project {slug} has {held.jobs} of its {jobs} jobs at once queued or running"
    limit = quota.max_concurrent_gpus
    if limit is not None and held.gpus + request.gpus > limit:
        return (
            f"project {slug} has {held.gpus} of its {limit} concurrent GPUs in use "
            f"and this job needs {request.gpus}"
        )
    return ""


def room_refusal(*, request: QuotaRequest, quota: Quota | None, held: Held, usage: Usage) -> str:
    """Whether the project has room now; empty if it has.

    In order: the GPU-, CPU- and node-hour budgets, then concurrent jobs, concurrent GPUs.
    """
    if quota is None:
        return no_budget_refusal(request.project)
    return budget_verdict(request=request, quota=quota, usage=usage) or concurrency_verdict(
        request=request, quota=quota, held=held
    )


def quota_refusal(
    *,
    request: QuotaRequest,
    quota: Quota | None,
    allowed_clusters: dict[int, str],
    held: Held,
    usage: Usage,
) -> QuotaRefusal | None:
    """Every rule a reservation must pass, in order; None when the request fits.

    Scope, per-job limits, a size the project can never hold at once, then the budgets:
    a QuotaRefusal. Last the concurrency limits: a QuotaFull, which may wait for room.
    """
    if quota is None:
        return QuotaRefusal(no_budget_refusal(request.project))
    scope = scope_refusal(request=request, quota=quota, allowed_clusters=allowed_clusters)
    if scope is not None:
        return scope
    errors = limit_errors(gpus=request.gpus, time_limit=request.time_limit, quota=quota)
    if errors:
        return QuotaRefusal(next(iter(errors.values()))[0], errors=errors)
    never = never_fits(request=request, quota=quota)
    if never:
        return QuotaRefusal(never, errors={"gpus_per_node": [never]})
    budget = budget_verdict(request=request, quota=quota, usage=usage)
    if budget:
        return QuotaRefusal(budget)
    full = concurrency_verdict(request=request, quota=quota, held=held)
    return QuotaFull(full) if full else None
