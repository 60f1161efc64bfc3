"""A cluster's queue as the portal knows it: the viewer's visible jobs there that have not ended.

One query: each job with its latest attempt's Slurm id, nodes, start and pending reason.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import OuterRef, Subquery

from clusters.models import Cluster
from jobs.access import jobs_visible_to
from jobs.enums import FINAL_STATES
from jobs.models import Attempt, Job
from portal_lib.viewers import Viewer

MAX_QUEUE_ROWS = 200


@dataclass(frozen=True)
class QueueRow:
    job: Job
    slurm_job_id: str
    nodes: str
    started_at: datetime | None
    pending_reason: str


def cluster_queue(*, user: Viewer | None, cluster: Cluster) -> tuple[list[QueueRow], bool]:
    """The rows, oldest first, and whether there were more than MAX_QUEUE_ROWS."""
    latest = Attempt.objects.filter(job_id=OuterRef("pk")).order_by("-number")
    jobs = (
        jobs_visible_to(user=user)
        .filter(cluster=cluster)
        .exclude(state__in=FINAL_STATES)
        .select_related("project", "user")
        .annotate(
            slurm_id=Subquery(latest.values("slurm_job_id")[:1]),
            on_nodes=Subquery(latest.values("node_list")[:1]),
            began=Subquery(latest.values("started_at")[:1]),
            waiting=Subquery(latest.values("slurm_reason")[:1]),
        )
        .order_by("created_at", "id")[: MAX_QUEUE_ROWS + 1]
    )
    rows = [
        QueueRow(
            job=job,
            slurm_job_id=job.slurm_id or "",
            nodes=job.on_nodes or "",
            started_at=job.began,
            pending_reason=job.waiting or "",
        )
        for job in jobs
    ]
    return rows[:MAX_QUEUE_ROWS], len(rows) > MAX_QUEUE_ROWS
