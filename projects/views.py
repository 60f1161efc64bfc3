"""The project page: members and roles, quota and usage over time, the latest jobs."""

from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from jobs.models import Job
from projects.models import Membership, Project
from projects.selectors import project_usage, usage_by_day

RECENT_JOBS = 20
USAGE_DAYS = 60


@login_required
@require_GET
def project_page(request: HttpRequest, slug: str) -> HttpResponse:
    user = request.user
    assert isinstance(user, User)  # noqa: S101 - behind login_required
    projects = Project.objects.select_related("quota").filter(slug=slug)
    if not user.is_staff:
        projects = projects.filter(memberships__user=user)
    project = projects.first()
    if project is None:
        raise Http404("No such project, or you are not one of its members.")
    members = list(
        Membership.objects.filter(project=project).select_related("user").order_by("role", "user")
    )
    jobs = list(
        Job.objects.filter(project=project)
        .select_related("cluster", "user")
        .defer("command", "setup", "metric_patterns")
        .order_by("-id")[:RECENT_JOBS]
    )
    usage = project_usage(project=project)
    since = min(
        timezone.localdate(usage.period_start), timezone.localdate() - timedelta(days=USAGE_DAYS)
    )
    days = usage_by_day(project=project, since=since)
    chart = {
        "days": [day.isoformat() for day, _ in days],
        "gpu_hours": [float(hours) for _, hours in days],
        "budget": float(usage.budget_gpu_hours) if usage.has_quota else None,
    }
    return render(
        request,
        "projects/detail.html",
        {
            "project": project,
            "members": members,
            "jobs": jobs,
            "usage": usage,
            "chart": chart,
            "is_owner": any(m.user_id == user.pk and m.role == "owner" for m in members),
        },
    )
