"""Resume a job from a checkpoint of its page's list, or fork a new job from one.

The fork is the submit form, prefilled from the parent as a clone is, with the checkpoint
named in the page's address; the checks are the services' (jobs.lineage, jobs.resume).
"""

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from jobs.access import job_for_viewer
from jobs.code.snapshots import snapshot_for
from jobs.errors import JobError
from jobs.lineage import at_step, fork_name
from jobs.models import Job
from jobs.services import job_submit
from jobs.specs import code_of, spec_from_job
from monitoring.checkpoints.chosen import checkpoint_chosen, checkpoint_resume, fork_point
from monitoring.checkpoints.registry import checkpoint_path
from monitoring.models import Checkpoint
from portal_lib.bounds import row_id
from portal_lib.errors import PortalError, form_add_error
from projects.models import Project
from web.auth import request_user
from web.jobs.forms import JobForm, initial_from_spec
from web.jobs.views import render_job_form


def _job(request: HttpRequest, job_id: int) -> Job:
    job = job_for_viewer(user=request.user, job_id=job_id)
    if job is None:
        raise Http404("No such job, or not one of your projects'.")
    return job


def _choice(source: dict[str, str]) -> dict[str, object]:
    """The checkpoint a link or a form names: its attempt and name, or its step."""
    step = row_id(source.get("step", ""))
    return {
        "attempt": row_id(source.get("attempt", "")),
        "name": source.get("checkpoint", "")[:1024],
        "step": step,
    }


@login_required
@require_POST
def job_resume_view(request: HttpRequest, job_id: int) -> HttpResponse:
    """Resume the ended job from the checkpoint chosen in its list: its next attempt."""
    job = _job(request, job_id)
    try:
        attempt = checkpoint_resume(
            job=job,
            user=request_user(request),
            **_choice(request.POST.dict()),  # type: ignore[arg-type]
        )
    except PortalError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Attempt {attempt.number} resumes from {attempt.resume_from}.")
    return redirect("job-page", job_id=job.pk)


@login_required
def job_fork_view(request: HttpRequest, job_id: int) -> HttpResponse:
    """The submit form for a new job from the parent's checkpoint (GET), and its submission."""
    user = request_user(request)
    parent = _job(request, job_id)
    try:
        chosen = checkpoint_chosen(job=parent, **_choice(request.GET.dict()))  # type: ignore[arg-type]
    except PortalError as exc:
        messages.error(request, exc.message)
        return redirect("job-page", job_id=parent.pk)
    if request.method == "POST":
        form = JobForm(request.POST, request.FILES, user=user)
        if form.is_valid():
            project = form.cleaned_data["project"]
            try:
                job = job_submit(
                    user=user,
                    project=project,
                    cluster=form.cleaned_data["cluster"],
                    spec=form.spec(_code(form, parent=parent, project=project)),
                    fork=fork_point(chosen),
                )
            except PortalError as exc:
                form_add_error(form, exc)
            else:
                messages.success(
                    request, f"Job #{job.pk} forked from #{parent.pk}{at_step(chosen.step)}."
                )
                return redirect("job-page", job_id=job.pk)
    elif request.method == "GET":
        initial = initial_from_spec(spec_from_job(parent))
        initial.update(
            project=parent.project_id, cluster=parent.cluster.name, name=fork_name(parent)
        )
        if parent.has_code:
            initial["code_from"] = parent.pk
        form = JobForm(user=user, initial=initial)
    else:
        return HttpResponse(status=405)
    return render_job_form(request, form, fork=_fork_context(parent, chosen, request))


def _code(form: JobForm, *, parent: Job, project: Project) -> dict[str, Any]:
    """The fork's code: what the form gives; the parent's snapshot in another project only
    if that project holds the same bytes (each project reaches its own snapshots only)."""
    code = form.code_fields(user=form.user, project=project)
    given = code.get("code") or code.get("code_git_url")
    if parent.code is None or project.pk == parent.project_id or given:
        return code
    snapshot = snapshot_for(user=form.user, project=project, sha256=parent.code.sha256)
    if snapshot is None:
        message = (
            f"Job #{parent.pk}'s code snapshot is in project {parent.project.slug}, not in "
            f"{project.slug}: upload the code here, or fork into {parent.project.slug}."
        )
        raise JobError(message, errors={"code_archive": [message]})
    return {**code_of(parent), "code": snapshot}


def _fork_context(parent: Job, chosen: Checkpoint, request: HttpRequest) -> dict[str, object]:
    return {
        "parent": parent,
        "step": chosen.step,
        "attempt": chosen.attempt.number,
        "path": checkpoint_path(chosen),
        "action": request.get_full_path(),
    }
