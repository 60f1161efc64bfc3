"""The sweep pages: a project's sweeps, the new-sweep form, a sweep's page and its buttons."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from jobs.access import can_submit, job_for_viewer
from portal_lib.bounds import row_id
from portal_lib.errors import PortalError, form_add_error
from projects.access import projects_visible_to
from projects.models import Project
from sweeps.access import can_steer, sweep_for_viewer
from sweeps.models import Sweep
from sweeps.selectors import (
    best_trial,
    compare_url,
    parallel_coordinates,
    sweep_trials,
    sweeps_of_project,
)
from sweeps.services import sweep_create, sweep_pause, sweep_resume, sweep_stop, trial_stop
from web.auth import request_user
from web.sweeps.forms import SweepForm

ACTIONS = {"pause": sweep_pause, "resume": sweep_resume, "stop": sweep_stop}


def _project(request: HttpRequest, slug: str) -> Project:
    project = projects_visible_to(user=request.user).filter(slug=slug).first()
    if project is None:
        raise Http404("No such project, or you are not one of its members.")
    return project


def _sweep(request: HttpRequest, sweep_id: int) -> Sweep:
    sweep = sweep_for_viewer(user=request.user, sweep_id=sweep_id)
    if sweep is None:
        raise Http404("No such sweep, or not one of your projects'.")
    return sweep


@login_required
@require_GET
def sweep_list(request: HttpRequest, slug: str) -> HttpResponse:
    project = _project(request, slug)
    return render(
        request,
        "sweeps/list.html",
        {
            "project": project,
            "sweeps": list(sweeps_of_project(project=project)),
            "may_submit": can_submit(user=request.user, project=project),
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def sweep_new(request: HttpRequest, slug: str) -> HttpResponse:
    user = request_user(request)
    project = _project(request, slug)
    initial = {"code_from": request.GET.get("code_from", "")}
    form = SweepForm(request.POST or None, request.FILES or None, user=user, initial=initial)
    if request.method == "POST" and form.is_valid():
        sweep = form.save(commit=False)
        sweep.project = project
        try:
            for field, value in form.code_fields(user=user, project=project).items():
                setattr(sweep, field, value)
            sweep_create(user=user, sweep=sweep)
        except PortalError as exc:
            form_add_error(form, exc)
        else:
            messages.success(request, f"Sweep {sweep.name} started.")
            return redirect("sweep-page", sweep_id=sweep.pk)
    code_from = form["code_from"].value()
    source_id = row_id(str(code_from or ""))
    source = job_for_viewer(user=user, job_id=source_id) if source_id is not None else None
    return render(
        request, "sweeps/new.html", {"project": project, "form": form, "code_from": source}
    )


@login_required
@require_GET
def sweep_page(request: HttpRequest, sweep_id: int) -> HttpResponse:
    sweep = _sweep(request, sweep_id)
    trials = sweep_trials(sweep=sweep)
    return render(
        request,
        "sweeps/detail.html",
        {
            "sweep": sweep,
            "trials": trials,
            "best": best_trial(sweep, trials),
            "chart": parallel_coordinates(sweep, trials),
            "compare_url": compare_url(sweep, trials),
            "may_steer": can_steer(user=request.user, sweep=sweep),
        },
    )


@login_required
@require_POST
def sweep_action(request: HttpRequest, sweep_id: int, action: str) -> HttpResponse:
    sweep = _sweep(request, sweep_id)
    if action not in ACTIONS:
        raise Http404("No such action.")
    try:
        ACTIONS[action](user=request_user(request), sweep=sweep)
    except PortalError as exc:
        messages.error(request, exc.message)
        return redirect("sweep-page", sweep_id=sweep.pk)
    messages.success(request, f"Sweep {sweep.name}: {sweep.get_state_display().lower()}.")
    return redirect("sweep-page", sweep_id=sweep.pk)


@login_required
@require_POST
def trial_stop_view(request: HttpRequest, sweep_id: int, number: int) -> HttpResponse:
    sweep = _sweep(request, sweep_id)
    trial = sweep.trials.filter(number=number).first()
    if trial is None:
        raise Http404("No such trial.")
    trial.sweep = sweep
    try:
        trial_stop(user=request_user(request), trial=trial)
    except PortalError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Stopping trial {number}.")
    return redirect("sweep-page", sweep_id=sweep.pk)
