"""A cluster's queue as the portal knows it: the viewer's visible jobs there that have not ended.

One query: each job with its latest attempt's Slurm id, nodes, start, pending reason and
expected start. `queue_parts` splits the rows as the cluster page shows them: the jobs
waiting in their project's line (with their places, one more query when there are any),
those pending in Slurm (with Slurm's reason in plain words), and the rest.
"""

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, F, OuterRef, Subquery, Window
from django.db.models.functions import RowNumber

from clusters.models import Cluster
from jobs.access import jobs_visible_to
from jobs.enums import FINAL_STATES, State
from jobs.models import Attempt, Job
from jobs.queue.line import Place
from jobs.queue.reasons import SlurmReason, explain_reason
from portal_lib.viewers import Viewer

MAX_QUEUE_ROWS = 200


@dataclass(frozen=True)
class QueueRow:
    job: Job
    slurm_job_id: str
    nodes: str
    started_at: datetime | None
    pending_reason: str  # Slurm's, verbatim: blank unless pending in Slurm
    attempt_id: int | None = None
    submitted_at: datetime | None = None  # sbatch accepted it
    expected_start_at: datetime | None = None  # Slurm's estimate, while pending
    line_reason: str = ""  # why it waits in the project's line (jobs.queue.line.wait_reason)

    @property
    def slurm_reason(self) -> SlurmReason | None:
        return explain_reason(self.pending_reason) if self.pending_reason else None


@dataclass(frozen=True)
class LineRow:
    row: QueueRow
    place: Place | None  # None only if it left the line between the two queries


@dataclass(frozen=True)
class QueueParts:
    line: list[LineRow] = field(default_factory=list)  # by project, then place
    pending: list[QueueRow] = field(default_factory=list)  # oldest first
    others: list[QueueRow] = field(default_factory=list)  # queued, submitting, running...


def cluster_queue(*, user: Viewer | None, cluster: Cluster) -> tuple[list[QueueRow], bool]:
    """The rows, oldest first, and whether there were more than MAX_QUEUE_ROWS."""
    latest = Attempt.objects.filter(job_id=OuterRef("pk")).order_by("-number")
    jobs = (
        jobs_visible_to(user=user)
        .filter(cluster=cluster)
        .exclude(state__in=FINAL_STATES)
        .select_related("project", "user")
        .annotate(
            attempt_pk=Subquery(latest.values("pk")[:1]),
            slurm_id=Subquery(latest.values("slurm_job_id")[:1]),
            on_nodes=Subquery(latest.values("node_list")[:1]),
            began=Subquery(latest.values("started_at")[:1]),
            waiting=Subquery(latest.values("slurm_reason")[:1]),
            submitted=Subquery(latest.values("submitted_at")[:1]),
            expected=Subquery(latest.values("expected_start_at")[:1]),
            why=Subquery(latest.values("reason")[:1]),
        )
        .order_by("created_at", "id")[: MAX_QUEUE_ROWS + 1]
    )
    rows = [
        QueueRow(
            job=job,
            slurm_job_id=job.slurm_id or "",
            nodes=job.on_nodes or "",
            started_at=job.began,
            pending_reason=(job.waiting or "") if job.state == State.PENDING else "",
            attempt_id=job.attempt_pk,
            submitted_at=job.submitted,
            expected_start_at=job.expected,
            line_reason=(job.why or "") if job.state == State.WAITING else "",
        )
        for job in jobs
    ]
    return rows[:MAX_QUEUE_ROWS], len(rows) > MAX_QUEUE_ROWS


def queue_parts(rows: list[QueueRow]) -> QueueParts:
    """The rows as the page groups them; one query for the line's places, if anyone waits."""
    waiting = [row for row in rows if row.job.state == State.WAITING]
    places = line_places_of(
        attempt_ids=[row.attempt_id for row in waiting if row.attempt_id is not None],
        project_ids={row.job.project_id for row in waiting},
    )
    line = [LineRow(row=row, place=places.get(row.attempt_id or 0)) for row in waiting]
    line.sort(key=lambda r: (r.row.job.project.slug, r.place.number if r.place else 0))
    return QueueParts(
        line=line,
        pending=[row for row in rows if row.job.state == State.PENDING],
        others=[row for row in rows if row.job.state not in (State.WAITING, State.PENDING)],
    )


def line_places_of(*, attempt_ids: list[int], project_ids: set[int]) -> dict[int, Place]:
    """Each attempt's place in its project's line, for any number of projects in one query.

    The order is the line's own (`jobs.queue.line.waiting_attempts`: attempt id), counted
    over every waiting attempt of the project, on any cluster: the line is the project's.
    """
    if not attempt_ids:
        return {}
    project = [F("job__project_id")]
    lines = (
        Attempt.objects.filter(state=State.WAITING, job__project_id__in=project_ids)
        .annotate(
            line_place=Window(RowNumber(), partition_by=project, order_by=F("id").asc()),
            line_length=Window(Count("id"), partition_by=project),
        )
        .values_list("id", "line_place", "line_length", "job__project__slug")
    )
    wanted = set(attempt_ids)
    return {
        attempt_id: Place(number=number, length=length, project=slug)
        for attempt_id, number, length, slug in lines
        if attempt_id in wanted
    }
