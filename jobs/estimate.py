"""What a job spec would cost and whether its project has room for it now (read only)."""

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from clusters.models import Cluster
from jobs.billing import quota_request
from jobs.models import Job
from jobs.specs import JobSpec
from projects.models import Project, Quota
from projects.quota import room_refusal
from projects.selectors import Held, held_now, project_usage

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


def job_estimate(*, project: Project, cluster: Cluster, spec: JobSpec) -> Estimate:
    """The job's GPU-, CPU- and node-hours and cost, and what its budgets have left."""
    request = quota_request(Job(project=project, cluster=cluster, **spec.job_fields()))
    usage = project_usage(project=project)
    quota = Quota.objects.filter(project=project).first()
    counts = quota is not None and (
        quota.max_concurrent_gpus is not None or quota.max_concurrent_jobs is not None
    )
    held = held_now(project_id=project.pk) if counts else Held()
    message = room_refusal(request=request, quota=quota, held=held, usage=usage)
    cost = (
        request.gpu_hours * cluster.price_per_gpu_hour
        + request.cpu_hours * cluster.price_per_cpu_hour
    )
    return Estimate(
        gpus=request.gpus,
        gpu_hours=request.gpu_hours,
        cost=cost.quantize(MONEY, ROUND_HALF_UP),
        left_before=usage.left_gpu_hours,
        left_after=usage.left_gpu_hours - request.gpu_hours,
        fits=not message,
        message=message,
        cpus=request.cpus,
        cpu_hours=request.cpu_hours,
        node_hours=request.node_hours,
        cpu_left_before=usage.cpu.left,
        node_left_before=usage.node.left,
    )
