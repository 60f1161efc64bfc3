"""Rows for tests, built directly: the one place that knows how (no factory library for so few)."""

from datetime import datetime, timedelta
from decimal import Decimal

from django.contrib.auth.models import User
from django.utils import timezone

from clusters.inventory import PartitionLimits
from clusters.models import Cluster, ClusterAccount
from devtools.keys import new_key_pair
from jobs.enums import State, Template
from jobs.models import Attempt, Job
from jobs.specs import JobSpec
from monitoring.goodput.efficiency import PARTS
from monitoring.models import AttemptProgress, EfficiencyCard
from monitoring.series.write import series_append
from projects.models import Project, UsageCharge
from sweeps.models import Sweep

GPU_PARTITION = PartitionLimits(
    name="gpu",
    is_default=True,
    nodes=2,
    gpus_per_node=2,
    cpus_per_node=2,
    memory_mb_per_node=8000,
    max_time=timedelta(days=1),
)


def spec(**overrides: object) -> JobSpec:
    values: dict[str, object] = {
        "name": "train",
        "template": Template.COMMAND,
        "command": "python train.py --lr 0.1",
        "nodes": 1,
        "gpus_per_node": 1,
        "cpus_per_task": 1,
        "memory_mb": None,
        "time_limit": timedelta(minutes=10),
        "partition": "gpu",
        "setup": "",
    }
    values.update(overrides)
    return JobSpec(**values)  # type: ignore[arg-type]


def cluster(name: str = "alps", **fields: object) -> Cluster:
    _, host_key = new_key_pair()
    values: dict[str, object] = {"ssh_host": f"login.{name}.example", "host_key": host_key}
    values.update(fields)
    return Cluster.objects.create(name=name, **values)


def account(cluster: Cluster, user: User | None) -> ClusterAccount:
    private, _ = new_key_pair()
    return ClusterAccount.objects.create(
        cluster=cluster, user=user, username=user.username if user else "svc", private_key=private
    )


def job(project: Project, user: User, cluster: Cluster, **overrides: object) -> tuple[Job, Attempt]:
    values: dict[str, object] = {
        "name": "train",
        "command": "python train.py",
        "time_limit": timedelta(minutes=10),
    }
    values.update(overrides)
    job = Job.objects.create(project=project, user=user, cluster=cluster, **values)
    return job, Attempt.objects.create(job=job, number=1)


def session(
    project: Project, user: User, cluster: Cluster, **overrides: object
) -> tuple[Job, Attempt]:
    """A JupyterLab session job (issue 39) and its first attempt, not started."""
    values: dict[str, object] = {"name": "lab", "command": "jupyter lab", **overrides}
    return job(project, user, cluster, template=Template.JUPYTER, **values)


def running_attempt(project: Project, user: User, cluster: Cluster, *, node: str = "n1") -> Attempt:
    """A running attempt with 2 GPUs on `node`: fresh samples, an MFU, a loss and its pace."""
    _, attempt = job(project, user, cluster, nodes=1, gpus_per_node=2)
    attempt.state = State.RUNNING
    attempt.node_list = node
    attempt.started_at = timezone.now() - timedelta(minutes=5)
    attempt.save()
    now = timezone.now().timestamp()
    series_append(
        points=[
            (attempt.pk, f"gpu/{node}/0/utilization", now, 87.0),
            (attempt.pk, f"gpu/{node}/0/memory_used", now, 1024.0),
            (attempt.pk, f"gpu/{node}/0/power", now, 310.5),
            (attempt.pk, f"gpu/{node}/1/utilization", now, 12.0),
            (attempt.pk, "mfu_computed", 40.0, 0.41),
            (attempt.pk, "loss", 40.0, 0.9),
        ]
    )
    AttemptProgress.objects.create(
        attempt=attempt, pace=[[now - 20 + 2 * i, 30 + i] for i in range(11)]
    )
    return attempt


def efficiency_card(
    attempt: Attempt, *, ended_at: datetime, queued: float = 0.0, **parts: float
) -> EfficiencyCard:
    """A stored card whose GPU-hours by part are `parts` (the others zero); charged: their sum."""
    unknown = set(parts) - set(PARTS)
    assert not unknown, f"no such parts: {unknown}"
    hours = {part: float(parts.get(part, 0.0)) for part in PARTS}
    total = sum(hours.values())
    return EfficiencyCard.objects.create(
        attempt=attempt,
        data={"gpu_hours": total, "queued_gpu_hours": queued, "parts": hours},
        from_ledger=True,
        ended_at=ended_at,
        gpu_hours=total,
        queued_gpu_hours=queued,
        **{f"{part}_gpu_hours": value for part, value in hours.items()},
    )


def usage_charge(attempt: Attempt, *, gpu_hours: str, ended_at: datetime) -> UsageCharge:
    """The ledger's charge of an ended attempt (four GPUs for an hour, `gpu_hours` charged),
    to its job's project, user and cluster."""
    job = attempt.job
    return UsageCharge.objects.create(
        attempt=attempt,
        project_id=job.project_id,
        user_id=job.user_id,
        cluster_id=job.cluster_id,
        gpus=4,
        started_at=ended_at - timedelta(hours=1),
        ended_at=ended_at,
        elapsed_seconds=3600,
        gpu_hours=Decimal(gpu_hours),
        cost=Decimal(0),
        source=UsageCharge.Source.SACCT,
    )


def sweep(job: Job) -> Sweep:
    """A one-trial sweep beside the job (same project, user and cluster), as a row."""
    return Sweep.objects.create(
        project=job.project,
        user=job.user,
        cluster=job.cluster,
        name="lr",
        command="python train.py --lr {lr}",
        space={"lr": [0.1]},
        max_trials=1,
    )
