from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from clusters.status import cached_cluster_status
from jobs.models import FINAL_STATES, Job, State
from projects.access import clusters_for_user
from projects.selectors import project_list_for_user, projects_usage

RECENT_JOBS = 10
_RUNNING = frozenset({State.RUNNING, State.COMPLETING})


def home(request: HttpRequest) -> HttpResponse:
    """The front page: the login form for visitors, the dashboard for members."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    return _dashboard(request)


@login_required
def _dashboard(request: HttpRequest) -> HttpResponse:
    assert isinstance(request.user, User)  # noqa: S101 - login_required
    user = request.user
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
