"""What the staff overview shows, read in a fixed number of queries whatever the number of
projects: each project's budget pace, the week's goodput beside the week before, the idle
policy as a form, the jobs that wasted most, and every cluster's line-up."""

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import Count, Q
from django.utils import timezone

from clusters.models import Cluster
from jobs.enums import State
from monitoring.goodput.report import (
    GoodputRow,
    WastedJob,
    cards_in_weeks,
    goodput_rows,
    iso_week,
    top_wasted_jobs,
)
from projects.burndown import BurnPace, projects_burn_pace
from projects.models import IdlePolicy, Project
from web.overview.forms import IdlePolicyForm

TOP_WASTED = 10
_WAITING = (State.WAITING, State.QUEUED, State.SUBMITTING, State.PENDING)
_RUNNING = (State.RUNNING, State.COMPLETING)


@dataclass(frozen=True)
class ProjectRow:
    pace: BurnPace
    week: GoodputRow | None  # None: no attempt of the project ended that week
    week_before: GoodputRow | None
    form: IdlePolicyForm

    @property
    def project(self) -> Project:
        return self.pace.project

    @property
    def spent_bar(self) -> int:
        """The bar's filled share in percent: what was spent, drawn no wider than the bar."""
        return min(self.pace.budget_percent or 0, 100)


@dataclass(frozen=True)
class ClusterLine:
    cluster: Cluster
    waiting: int  # in the portal's lines or pending in Slurm
    running: int


@dataclass(frozen=True)
class Overview:
    at: datetime
    week: date  # the Monday of the week shown
    rows: list[ProjectRow]
    wasted: list[WastedJob]
    clusters: list[ClusterLine]

    @property
    def at_risk(self) -> list[BurnPace]:
        """Projects out of budget or on course to be before their period ends, soonest first."""
        paces = [row.pace for row in self.rows if row.pace.on_course_to_run_out]
        return sorted(paces, key=lambda p: (p.runs_out_at or self.at, p.project.slug))

    @property
    def iso_week(self) -> str:
        return iso_week(self.week)

    @property
    def week_before(self) -> str:
        return iso_week(self.week - timedelta(weeks=1))

    @property
    def next_week(self) -> str | None:
        following = self.week + timedelta(weeks=1)
        return iso_week(following) if following <= timezone.localdate(self.at) else None


def _cluster_lines() -> list[ClusterLine]:
    clusters = Cluster.objects.annotate(
        waiting=Count("jobs", filter=Q(jobs__state__in=_WAITING)),
        running=Count("jobs", filter=Q(jobs__state__in=_RUNNING)),
    ).order_by("name")
    return [ClusterLine(c, waiting=c.waiting, running=c.running) for c in clusters]


def overview(*, week: date, at: datetime, bound: IdlePolicyForm | None = None) -> Overview:
    """The page's data: eight queries. `bound` (a refused edit) replaces its project's form,
    so the page shows the refusal beside the values that were sent."""
    projects = list(Project.objects.order_by("slug"))
    paces = projects_burn_pace(projects=projects, at=at)
    before = week - timedelta(weeks=1)
    goodput = {
        (row.project, row.week): row
        for row in goodput_rows(cards_in_weeks(first=before, last=week), by=("project",))
    }
    policies = {p.project_id: p for p in IdlePolicy.objects.all()}
    rows = []
    for pace in paces:
        project = pace.project
        form = bound if bound is not None and bound.project.pk == project.pk else None
        rows.append(
            ProjectRow(
                pace=pace,
                week=goodput.get((project.slug, week)),
                week_before=goodput.get((project.slug, before)),
                form=form or IdlePolicyForm(project=project, policy=policies.get(project.pk)),
            )
        )
    return Overview(
        at=at,
        week=week,
        rows=rows,
        wasted=top_wasted_jobs(week=week, limit=TOP_WASTED),
        clusters=_cluster_lines(),
    )
