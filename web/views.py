from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.defaults import page_not_found

from clusters.status import cached_cluster_status
from jobs.enums import FINAL_STATES, State, Template
from jobs.models import Job
from monitoring.checkpoints.storage import project_storage
from monitoring.goodput.report import PART_TITLES, project_goodput
from projects.access import clusters_for_user, projects_visible_to
from projects.burndown import burn_down
from projects.models import Membership
from projects.selectors import (
    project_list_for_user,
    project_usage,
    projects_usage,
    usage_by_day,
)
from projects.storage import project_code_storage
from web.auth import request_user

RECENT_JOBS = 10
_RUNNING = frozenset({State.RUNNING, State.COMPLETING})


def home(request: HttpRequest) -> HttpResponse:
    """The front page: the login form for visitors, the dashboard for members."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    return _dashboard(request)


@login_required
def _dashboard(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    projects = list(project_list_for_user(user=user))
    usage = projects_usage(projects=projects)
    mine = (
        Job.objects.filter(user=user)
        .select_related("project", "cluster")
        .defer("command", "setup", "metric_patterns")
    )
    active = list(mine.exclude(state__in=FINAL_STATES).order_by("-id")[:50])
    recent = list(mine.filter(state__in=FINAL_STATES).order_by("-id")[:RECENT_JOBS])
    clusters = [
        (cluster, cached_cluster_status(cluster))
        for cluster in clusters_for_user(user=user).filter(is_active=True)
    ]
    return render(
        request,
        "dashboard.html",
        {
            "project_rows": [(project, usage.get(project.pk)) for project in projects],
            "projects": projects,
            "running": [job for job in active if job.state in _RUNNING],
            "pending": [job for job in active if job.state not in _RUNNING],
            "recent": recent,
            "clusters": clusters,
        },
    )


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


RECENT_PROJECT_JOBS = 20


@login_required
@require_GET
def project_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The project page: members and roles, quota and usage over time, goodput, the latest jobs.

    Here, not in projects: it shows jobs, and projects knows nothing of jobs.
    """
    user = request.user
    assert isinstance(user, User)  # noqa: S101 - behind login_required
    project = projects_visible_to(user=user).select_related("quota").filter(slug=slug).first()
    if project is None:
        raise Http404("No such project, or you are not one of its members.")
    members = list(
        Membership.objects.filter(project=project).select_related("user").order_by("role", "user")
    )
    jobs = list(
        Job.objects.filter(project=project)
        .select_related("cluster", "user")
        .defer("command", "setup", "metric_patterns")
        .order_by("-id")[:RECENT_PROJECT_JOBS]
    )
    usage = project_usage(project=project)
    days = usage_by_day(project=project, since=timezone.localdate(usage.period_start))
    chart = burn_down(usage=usage, days=days, today=timezone.localdate())
    return render(
        request,
        "projects/detail.html",
        {
            "project": project,
            "members": members,
            "jobs": jobs,
            "usage": usage,
            "code_storage": project_code_storage(project=project),
            "checkpoint_storage": project_storage(project=project),
            "templates": Template.choices,
            "chart": chart,
            "goodput": project_goodput(project_id=project.pk),
            "part_titles": PART_TITLES.values(),
            "is_owner": any(m.user_id == user.pk and m.role == "owner" for m in members),
        },
    )


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A path no route matches: JSON under /api/ (as DRF's own 404s), else Django's page.

    A series name with a newline matched no API route, and the client got an HTML page
    where the schema promises JSON (tests/api/test_schema.py found it).
    """
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)
