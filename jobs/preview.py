"""What the submit form shows beside the fields: the batch script and the cost, unsaved."""

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone

from clusters.models import Cluster
from jobs.estimate import Room, job_estimate
from jobs.models import Attempt, Job
from jobs.queue.waits import WaitHistory, format_wait, waits_by_cluster
from jobs.rundir import RunDir
from jobs.scripts import render_batch_script
from jobs.specs import JobSpec
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
    *,
    project: Project,
    cluster: Cluster,
    spec: JobSpec,
    others: list[Cluster] | None = None,
    now: datetime | None = None,
    room: Room | None = None,
) -> dict[str, Any]:
    """The quota estimate as JSON: hours reserved, cost, budgets left before and after,
    how long similar jobs waited on this cluster ("typical_wait"), and on it and each of
    `others` (the other clusters the project may use) with the one they started soonest
    on ("waits", "sooner").

    A CPU- or node-hour budget left of None is no limit. `room`: the project's, if read.
    """
    estimate = job_estimate(project=project, cluster=cluster, spec=spec, room=room)
    clusters = {c.pk: c for c in [cluster, *(others or [])]}
    waits = waits_by_cluster(
        cluster_ids=list(clusters),
        partition=spec.partition,
        nodes=spec.nodes,
        gpus_per_node=spec.gpus_per_node,
        now=now or timezone.now(),
    )
    chosen = waits[cluster.pk]
    return {
        "gpu_hours": amount_text(estimate.gpu_hours),
        "cpus": estimate.cpus,
        "cpu_hours": amount_text(estimate.cpu_hours),
        "node_hours": amount_text(estimate.node_hours),
        "cost": amount_text(estimate.cost),
        "price_per_gpu_hour": amount_text(cluster.price_per_gpu_hour),
        "price_per_cpu_hour": amount_text(cluster.price_per_cpu_hour),
        "cpu_left_before": amount_text(estimate.cpu_left_before),
        "node_left_before": amount_text(estimate.node_left_before),
        "left_before": amount_text(estimate.left_before),
        "left_after": amount_text(estimate.left_after),
        "fits": bool(estimate.fits),
        "message": estimate.message,
        "typical_wait": f"{chosen.typical} ({chosen.spec_text})",
        **wait_comparison(chosen=cluster, clusters=clusters, waits=waits),
    }


def wait_comparison(
    *, chosen: Cluster, clusters: dict[int, Cluster], waits: dict[int, WaitHistory]
) -> dict[str, Any]:
    """Each cluster's typical wait for the spec, by name, and which started it soonest.

    "Soonest" is the lowest median among clusters with enough similar jobs to have one; the
    chosen cluster wins a tie, and "sooner" says so only when another cluster wins.
    """
    known = [pk for pk in clusters if waits[pk].median is not None]
    soonest = min(known, key=lambda pk: (waits[pk].median, pk != chosen.pk), default=None)
    rows = [
        {
            "cluster": clusters[pk].name,
            "typical": waits[pk].typical,
            "median_seconds": _seconds(waits[pk]),
            "count": waits[pk].count,
            "chosen": pk == chosen.pk,
            "soonest": pk == soonest,
        }
        for pk in sorted(clusters, key=lambda pk: (pk != chosen.pk, clusters[pk].name))
    ]
    sooner = ""
    if soonest is not None and soonest != chosen.pk:
        sooner = _sooner(clusters[soonest].name, waits[soonest], chosen.name, waits[chosen.pk])
    return {"waits": rows, "sooner": sooner}


def _sooner(name: str, best: WaitHistory, chosen: str, here: WaitHistory) -> str:
    """E.g. "Similar jobs started sooner on b: 3 min median (20 min on a)."."""
    fast = format_wait(best.median) if best.median is not None else "?"
    if here.median is not None:
        compared = f"{format_wait(here.median)} on {chosen}"
    else:
        compared = f"too few similar jobs on {chosen} to tell"
    return f"Similar jobs started sooner on {name}: {fast} median ({compared})."


def _seconds(history: WaitHistory) -> float | None:
    return history.median.total_seconds() if history.median is not None else None


def amount_text(value: Decimal | float | int | None) -> str | None:
    """Hours and money as the form shows them: 1,234.50."""
    if value is None:
        return None
    return f"{Decimal(value).quantize(Decimal('0.01')):,}"
