"""The job list page's reads: the user's projects' jobs, filtered, sorted and keyset-paged.

With 100,000 jobs an OFFSET page and a full COUNT(*) get slower the deeper one
goes; a keyset page (`WHERE (key, id) < (last key, last id) ... LIMIT n`) and a
count capped at COUNT_CAP cost the same on every page.
"""

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db.models import F, Q, QuerySet

from clusters.models import Cluster
from jobs.access import can_cancel
from jobs.enums import FINAL_STATES, State
from jobs.models import Job
from portal_lib.bounds import row_id
from portal_lib.viewers import sees_everything
from projects.access import projects_visible_to
from projects.models import Membership, Project

PAGE_SIZE = 50
COUNT_CAP = 1000
# Sort name -> the ordering field (ties broken by id in the same direction).
SORTS: dict[str, str] = {
    "newest": "-id",
    "oldest": "id",
    "name": "name",
    "-name": "-name",
    "state": "state",
    "-state": "-state",
    "gpus": "total_gpus_sort",
    "-gpus": "-total_gpus_sort",
}
STATE_GROUPS: dict[str, list[str]] = {
    "active": [s for s in State.values if s not in FINAL_STATES],
    "finished": sorted(FINAL_STATES),
}
_ROW_FIELDS = (
    "id",
    "name",
    "template",
    "nodes",
    "gpus_per_node",
    "state",
    "created_at",
    "user_id",
    "project_id",
    "cluster_id",
    "project__slug",
    "project__name",
    "cluster__name",
    "user__username",
)


@dataclass(frozen=True)
class Filters:
    project: str = ""
    state: str = ""
    user: str = ""
    cluster: str = ""
    text: str = ""
    sort: str = "newest"

    @classmethod
    def from_query(cls, query: Any) -> "Filters":
        sort = query.get("sort", "newest")
        return cls(
            project=query.get("project", "").strip(),
            state=query.get("state", "").strip(),
            user=query.get("user", "").strip(),
            cluster=query.get("cluster", "").strip(),
            text=query.get("q", "").strip()[:200],
            sort=sort if sort in SORTS else "newest",
        )

    def as_query(self) -> dict[str, str]:
        values = {
            "project": self.project,
            "state": self.state,
            "user": self.user,
            "cluster": self.cluster,
            "q": self.text,
            "sort": self.sort if self.sort != "newest" else "",
        }
        return {key: value for key, value in values.items() if value}


@dataclass(frozen=True)
class Access:
    """What the user may list (jobs.access's rule, read once) and where they own the project."""

    user: User
    projects: list[Project]
    owner_of: frozenset[int]
    every_project: bool = False  # the staff rule: every job is listed

    @property
    def project_ids(self) -> list[int]:
        return [project.pk for project in self.projects]


@dataclass
class JobPage:
    jobs: list[Job]
    count: int  # at most COUNT_CAP + 1
    count_capped: bool  # more than COUNT_CAP: shown as "more than"
    next_cursor: str = ""
    prev_cursor: str = ""
    clusters: list[Cluster] = field(default_factory=list)


def access_for(*, user: User) -> Access:
    """One query: the user's projects and the ones they own (staff: every project, two)."""
    memberships = list(
        Membership.objects.filter(user=user).select_related("project").order_by("project__slug")
    )
    owner_of = frozenset(m.project_id for m in memberships if m.role == Membership.Role.OWNER)
    if sees_everything(user):
        projects = list(projects_visible_to(user=user).order_by("slug"))
        return Access(user=user, projects=projects, owner_of=owner_of, every_project=True)
    return Access(user=user, projects=[m.project for m in memberships], owner_of=owner_of)


def can_cancel_now(*, access: Access, job: Job) -> bool:
    """Whether the list offers to cancel the job: jobs.access's rule, while it has not finished."""
    if job.state in FINAL_STATES:
        return False
    return can_cancel(user=access.user, job=job, owner_of=access.owner_of)


def _encode(value: object, pk: int) -> str:
    raw = json.dumps([value, pk], default=str).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str) -> tuple[object, int] | None:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value, pk = json.loads(raw)
    except (ValueError, TypeError):
        return None
    if not isinstance(pk, int) or not isinstance(value, str | int | None):
        return None
    return value, pk


def filtered_jobs(*, access: Access, filters: Filters, clusters: list[Cluster]) -> QuerySet[Job]:
    """Jobs of the user's projects matching the filters (no query runs here)."""
    jobs = Job.objects.all()
    if not access.every_project:
        jobs = jobs.filter(project_id__in=access.project_ids)
    if filters.project:
        jobs = jobs.filter(
            project_id__in=[p.pk for p in access.projects if p.slug == filters.project]
        )
    if filters.state in STATE_GROUPS:
        jobs = jobs.filter(state__in=STATE_GROUPS[filters.state])
    elif filters.state:
        jobs = jobs.filter(state=filters.state)
    if filters.cluster:
        jobs = jobs.filter(cluster_id__in=[c.pk for c in clusters if c.name == filters.cluster])
    if filters.user:
        jobs = jobs.filter(user__username=filters.user)
    if filters.text:
        text = filters.text.removeprefix("#")
        match = Q(name__icontains=filters.text)
        if (job_id := row_id(text)) is not None:
            match |= Q(pk=job_id)
        jobs = jobs.filter(match)
    return jobs


def _sorted(jobs: QuerySet[Job], sort: str) -> tuple[QuerySet[Job], str, bool]:
    """The queryset with its sort key annotated; the key's name; whether it descends."""
    order = SORTS[sort]
    key = order.lstrip("-")
    if key == "total_gpus_sort":
        jobs = jobs.annotate(total_gpus_sort=F("nodes") * F("gpus_per_node"))
    return jobs, key, order.startswith("-")


def job_page(
    *, access: Access, filters: Filters, after: str = "", before: str = "", size: int = PAGE_SIZE
) -> JobPage:
    """One page: three queries (clusters, capped count, rows), whatever the page's depth."""
    clusters = list(Cluster.objects.only("id", "name").order_by("name"))
    jobs = filtered_jobs(access=access, filters=filters, clusters=clusters)
    count = jobs.order_by()[: COUNT_CAP + 1].count()
    jobs, key, descending = _sorted(jobs, filters.sort)
    cursor = _decode(before or after) if (before or after) else None
    if cursor is not None and not _fits(key, cursor[0]):
        cursor = None  # a hand-edited cursor: start from the first page
    backwards = bool(before) and cursor is not None
    # Walking backwards is walking forwards in the opposite order, then reversing.
    down = descending != backwards
    if cursor is not None:
        value, pk = cursor
        if key == "id":
            jobs = jobs.filter(pk__lt=pk) if down else jobs.filter(pk__gt=pk)
        else:
            op = "lt" if down else "gt"
            jobs = jobs.filter(Q(**{f"{key}__{op}": value}) | Q(**{key: value, f"pk__{op}": pk}))
    prefix = "-" if down else ""
    ordering = [f"{prefix}{key}", f"{prefix}id"] if key != "id" else [f"{prefix}id"]
    rows = list(
        jobs.select_related("project", "cluster", "user")
        .only(*_ROW_FIELDS)
        .order_by(*ordering)[: size + 1]
    )
    more = len(rows) > size
    rows = rows[:size]
    if backwards:
        rows.reverse()
    page = JobPage(jobs=rows, count=count, count_capped=count > COUNT_CAP, clusters=clusters)
    if rows:
        first, last = rows[0], rows[-1]
        has_next = more if not backwards else True
        has_prev = (cursor is not None) if not backwards else more
        if has_next:
            page.next_cursor = _encode(_key_value(last, key), last.pk)
        if has_prev:
            page.prev_cursor = _encode(_key_value(first, key), first.pk)
    return page


def _fits(key: str, value: object) -> bool:
    """Whether a cursor's value has the sort key's type (the database would refuse it)."""
    if key in ("id", "total_gpus_sort"):
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str)


def _key_value(job: Job, key: str) -> object:
    if key == "total_gpus_sort":
        return job.nodes * job.gpus_per_node
    return getattr(job, key)
