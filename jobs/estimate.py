"""What a job spec would cost and whether its project has room for it now (read only)."""

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from clusters.models import Cluster
from jobs.billing import quota_request
from jobs.models import Job
from jobs.specs import JobSpec
from projects.models import Project, Quota
from projects.quota import room_refusal
from projects.selectors import held_gpus, project_usage

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


def job_estimate(*, project: Project, cluster: Cluster, spec: JobSpec) -> Estimate:
    """The job's GPU-hours and cost, and what the budget has left before and after it."""
    request = quota_request(Job(project=project, cluster=cluster, **spec.job_fields()))
    usage = project_usage(project=project)
    quota = Quota.objects.filter(project=project).first()
    held = (
        held_gpus(project_id=project.pk) if quota and quota.max_concurrent_gpus is not None else 0
    )
    message = room_refusal(request=request, quota=quota, held=held, usage=usage)
    return Estimate(
        gpus=request.gpus,
        gpu_hours=request.gpu_hours,
        cost=(request.gpu_hours * cluster.price_per_gpu_hour).quantize(MONEY, ROUND_HALF_UP),
        left_before=usage.left_gpu_hours,
        left_after=usage.left_gpu_hours - request.gpu_hours,
        fits=not message,
        message=message,
    )
