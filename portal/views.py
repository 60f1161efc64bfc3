from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from jobs.models import Job
from projects.selectors import project_list_for_user


def home(request: HttpRequest) -> HttpResponse:
    """The front page: the login form for visitors, the dashboard for members."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    return _dashboard(request)


@login_required
def _dashboard(request: HttpRequest) -> HttpResponse:
    assert isinstance(request.user, User)  # noqa: S101 - login_required
    projects = project_list_for_user(user=request.user)
    jobs = Job.objects.filter(user=request.user).select_related("project", "cluster")[:20]
    return render(request, "dashboard.html", {"projects": projects, "jobs": jobs})


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
