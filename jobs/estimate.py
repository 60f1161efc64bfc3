"""What a job spec would cost and whether its project has room for it now (read only).

`project_room` reads what the project has (a few queries); `request_estimate` is the
arithmetic on it, so the form's estimate and a plan (monitoring.runs.plan) share one read.
"""

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from clusters.models import Cluster
from jobs.billing import quota_request
from jobs.models import Job
from jobs.specs import JobSpec
from projects.models import Project, Quota
from projects.quota import QuotaRequest, budget_verdict, concurrency_verdict, price_of
from projects.selectors import Held, Usage, held_now, project_usage

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
    cpus: int = 0
    cpu_hours: Decimal = Decimal(0)
    node_hours: Decimal = Decimal(0)
    # None: the project has no CPU-hour (node-hour) limit.
    cpu_left_before: Decimal | None = None
    node_left_before: Decimal | None = None


@dataclass(frozen=True)
class Room:
    """What the project has now: its quota row, live attempts' holdings and budgets' use."""

    quota: Quota | None
    held: Held
    usage: Usage


def project_room(*, project: Project) -> Room:
    """The project's quota, usage and (where a concurrency limit needs them) holdings."""
    usage = project_usage(project=project)
    quota = Quota.objects.filter(project=project).first()
    counts = quota is not None and (
        quota.max_concurrent_gpus is not None or quota.max_concurrent_jobs is not None
    )
    held = held_now(project_id=project.pk) if counts else Held()
    return Room(quota=quota, held=held, usage=usage)


def request_estimate(*, request: QuotaRequest, room: Room) -> Estimate:
    """The request's hours and cost, and whether the room has space for it (no queries)."""
    usage = room.usage
    message = budget_verdict(request=request, quota=room.quota, usage=usage)
    wait = ""
    if room.quota is not None:
        wait = concurrency_verdict(request=request, quota=room.quota, held=room.held)
    cost = price_of(
        gpu_hours=request.gpu_hours, cpu_hours=request.cpu_hours, prices=request.cluster
    )
    return Estimate(
        gpus=request.gpus,
        gpu_hours=request.gpu_hours,
        cost=cost.quantize(MONEY, ROUND_HALF_UP),
        left_before=usage.left_gpu_hours,
        left_after=usage.left_gpu_hours - request.gpu_hours,
        # Over a concurrency limit only: accepted, it waits in the project's line.
        fits=not message,
        message=message or (f"Would wait in the project's line: {wait}." if wait else ""),
        cpus=request.cpus,
        cpu_hours=request.cpu_hours,
        node_hours=request.node_hours,
        cpu_left_before=usage.cpu.left,
        node_left_before=usage.node.left,
    )


def spec_request(*, project: Project, cluster: Cluster, spec: JobSpec) -> QuotaRequest:
    """What a spec would ask of its project's quota."""
    return quota_request(Job(project=project, cluster=cluster, **spec.job_fields()))


def job_estimate(
    *, project: Project, cluster: Cluster, spec: JobSpec, room: Room | None = None
) -> Estimate:
    """The job's GPU-, CPU- and node-hours and cost, and what its budgets have left."""
    return request_estimate(
        request=spec_request(project=project, cluster=cluster, spec=spec),
        room=room or project_room(project=project),
    )
