"""The staff overview page and its in-place idle-policy edit: staff only, as draining is.

A non-staff user is refused (403) and nothing changes; the edit goes through
projects.idle_policy, as the admin's inline is the raw edit beside it.
"""

from datetime import date

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from monitoring.goodput.report import parse_iso_week, week_start
from portal_lib.viewers import is_staff
from projects.idle_policy import idle_policy_remove, idle_policy_set
from projects.models import IdlePolicy, Project
from web.auth import request_user
from web.overview.forms import IdlePolicyForm, policy_words
from web.overview.rows import overview


def _staff_only(request: HttpRequest) -> None:
    if not is_staff(request.user):
        raise PermissionDenied("Only staff see the overview.")


def _week(request: HttpRequest) -> date:
    """The week of ?week=2026-W48, this week when absent or not a week (never a future one)."""
    this_week = week_start(timezone.localdate())
    try:
        chosen = parse_iso_week(request.GET.get("week", ""))
    except ValueError:
        return this_week
    return min(chosen, this_week)


def _page(request: HttpRequest, *, bound: IdlePolicyForm | None = None) -> HttpResponse:
    data = overview(week=_week(request), at=timezone.now(), bound=bound)
    return render(request, "overview/page.html", {"overview": data}, status=400 if bound else 200)


@login_required
@require_GET
def overview_page(request: HttpRequest) -> HttpResponse:
    _staff_only(request)
    return _page(request)


@login_required
@require_POST
def idle_policy_edit(request: HttpRequest, slug: str) -> HttpResponse:
    """Set or remove one project's idle policy; back to the overview at its row."""
    _staff_only(request)
    project = get_object_or_404(Project, slug=slug)
    policy = IdlePolicy.objects.filter(project=project).first()
    form = IdlePolicyForm(request.POST, project=project, policy=policy)
    if form.is_valid():
        user = request_user(request)
        if not form.cleaned_data["watch"]:
            if idle_policy_remove(project=project, user=user):
                messages.success(request, f"{project.slug}: idle GPUs are no longer watched.")
            return redirect(f"{reverse('staff-overview')}#policy-{project.slug}")
        try:
            saved = idle_policy_set(project=project, user=user, **form.durations())
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"{project.slug}: idle policy saved ({policy_words(saved)}).")
            return redirect(f"{reverse('staff-overview')}#policy-{project.slug}")
    messages.error(request, f"{project.slug}: the idle policy was not saved; see its row.")
    return _page(request, bound=form)
