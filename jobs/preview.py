"""What the submit form shows beside the fields: the batch script and the cost, unsaved."""

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone

from clusters.models import Cluster
from jobs.estimate import job_estimate
from jobs.models import Attempt, Job
from jobs.rundir import RunDir
from jobs.scripts import render_batch_script
from jobs.specs import JobSpec
from jobs.waits import similar_waits
from projects.models import Project

PENDING_ID = "(set at submission)"


def unsaved_job(*, project: Project, cluster: Cluster, spec: JobSpec) -> Job:
    """A Job built from the spec, never saved: what the script and the estimate read."""
    return Job(
        project=project,
        cluster=cluster,
        **spec.job_fields(),
    )


def script_preview(*, project: Project, cluster: Cluster, spec: JobSpec) -> str:
    """The batch script the job's first attempt will get (ids and paths come at submission)."""
    job = unsaved_job(project=project, cluster=cluster, spec=spec)
    attempt = Attempt(job=job, number=1)
    run_dir = RunDir(f"{cluster.base_run_dir.rstrip('/')}/{attempt.uuid}")
    script = render_batch_script(job=job, attempt=attempt, run_dir=run_dir)
    return script.replace("for job None,", "for a new job,").replace(
        "PORTAL_JOB_ID=None", f"PORTAL_JOB_ID='{PENDING_ID}'"
    )


def estimate_for(
    *, project: Project, cluster: Cluster, spec: JobSpec, now: datetime | None = None
) -> dict[str, Any]:
    """The quota estimate as JSON: hours reserved, cost, budgets left before and after,
    and how long similar jobs waited on this cluster ("typical_wait").

    A CPU- or node-hour budget left of None is no limit.
    """
    estimate = job_estimate(project=project, cluster=cluster, spec=spec)
    waits = similar_waits(
        cluster_id=cluster.pk,
        partition=spec.partition,
        nodes=spec.nodes,
        gpus_per_node=spec.gpus_per_node,
        now=now or timezone.now(),
    )
    return {
        "gpu_hours": _number(estimate.gpu_hours),
        "cpus": estimate.cpus,
        "cpu_hours": _number(estimate.cpu_hours),
        "node_hours": _number(estimate.node_hours),
        "cost": _number(estimate.cost),
        "price_per_gpu_hour": _number(cluster.price_per_gpu_hour),
        "price_per_cpu_hour": _number(cluster.price_per_cpu_hour),
        "cpu_left_before": _number(estimate.cpu_left_before),
        "node_left_before": _number(estimate.node_left_before),
        "left_before": _number(estimate.left_before),
        "left_after": _number(estimate.left_after),
        "fits": bool(estimate.fits),
        "message": estimate.message,
        "typical_wait": f"{waits.typical} ({waits.spec_text})",
    }


def _number(value: Decimal | float | int | None) -> str | None:
    if value is None:
        return None
    return f"{Decimal(value).quantize(Decimal('0.01')):,}"
