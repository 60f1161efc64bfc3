"""The job's checkpoint page: the index with each checkpoint's step, size and metrics, the
rule in effect and its preview (or a preview of values not saved yet), delete buttons, and
the deletions recorded. Writes go through monitoring.checkpoints.services."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from jobs.access import can_cancel, job_for_viewer
from jobs.enums import Template
from jobs.models import Job
from monitoring.checkpoints.page import checkpoint_page
from monitoring.checkpoints.services import (
    checkpoint_rule_save,
    checkpoints_delete,
    retention_apply,
)
from monitoring.models import CheckpointDeletion
from portal_lib.bounds import row_ids
from portal_lib.errors import PortalError, form_add_error
from projects.access import projects_visible_to
from web.auth import request_user
from web.checkpoints.forms import RuleForm, initial_of, transient_rule


def _job(request: HttpRequest, job_id: int) -> Job:
    job = job_for_viewer(user=request_user(request), job_id=job_id)
    if job is None:
        raise Http404("No such job, or not one of your projects'.")
    return job


def _render(request: HttpRequest, job: Job, form: RuleForm, previewing: bool) -> HttpResponse:
    preview = transient_rule(form.rule_fields()) if previewing else None
    page = checkpoint_page(job=job, preview=preview)
    if not previewing and not form.is_bound:
        form = RuleForm(initial=initial_of(page.rule if page.rule and page.rule.job_id else None))
    return render(
        request,
        "monitoring/checkpoints.html",
        {
            "job": job,
            "page": page,
            "form": form,
            "previewing": previewing,
            "may_change": can_cancel(user=request_user(request), job=job),
        },
    )


@login_required
@require_GET
def checkpoints_page(request: HttpRequest, job_id: int) -> HttpResponse:
    """With `preview` in the query, the verdicts are those of the form's values, unsaved."""
    job = _job(request, job_id)
    if "preview" in request.GET:
        form = RuleForm(request.GET)
        if form.is_valid():
            return _render(request, job, form, previewing=True)
        return _render(request, job, form, previewing=False)
    return _render(request, job, RuleForm(), previewing=False)


@login_required
@require_POST
def checkpoints_rule(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job(request, job_id)
    form = RuleForm(request.POST)
    if form.is_valid():
        try:
            fields = form.rule_fields()
            fields.pop("quota_bytes")
            rule = checkpoint_rule_save(
                user=request_user(request), project=job.project, job=job, **fields
            )
        except PortalError as exc:
            form_add_error(form, exc)
        else:
            messages.success(
                request, "The job's checkpoint rule is saved." if rule else "The rule is cleared."
            )
            return redirect("job-checkpoints", job_id=job.pk)
    return _render(request, job, form, previewing=False)


@login_required
@require_POST
def checkpoints_delete_view(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job(request, job_id)
    user = request_user(request)
    try:
        ids = row_ids(",".join(request.POST.getlist("checkpoint")), name="checkpoint", limit=1000)
        done = checkpoints_delete(
            job=job, ids=ids, reason=f"deleted by {user.get_username()}", user=user
        )
    except PortalError as exc:
        messages.error(request, exc.message)
    else:
        _report(request, done)
    return redirect("job-checkpoints", job_id=job.pk)


@login_required
@require_POST
def checkpoints_apply(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job(request, job_id)
    user = request_user(request)
    if not can_cancel(user=user, job=job):
        messages.error(request, "Only the job's submitter or a project owner can apply its rule.")
        return redirect("job-checkpoints", job_id=job.pk)
    try:
        done = retention_apply(job=job, why=f"applied by {user.get_username()}", user=user)
    except PortalError as exc:
        messages.error(request, exc.message)
    else:
        _report(request, done)
    return redirect("job-checkpoints", job_id=job.pk)


def _report(request: HttpRequest, done: list[CheckpointDeletion]) -> None:
    removed = [d for d in done if d.removed]
    failed = [f"{d.name}: {d.error}" for d in done if not d.removed]
    if removed or not failed:
        messages.success(request, f"{len(removed)} checkpoint(s) deleted.")
    if failed:
        messages.error(request, "Not deleted: " + "; ".join(failed))


@login_required
@require_POST
def project_checkpoint_rule(request: HttpRequest, slug: str) -> HttpResponse:
    """The project page's form: the project's rule (or one template's) and its quota."""
    project = projects_visible_to(user=request_user(request)).filter(slug=slug).first()
    if project is None:
        raise Http404("No such project, or you are not one of its members.")
    template = request.POST.get("template", "")
    form = RuleForm(request.POST, project_scope=not template)
    if template and template not in Template.values:
        messages.error(request, f"No template {template!r}.")
    elif not form.is_valid():
        messages.error(
            request,
            "The rule needs changes: "
            + "; ".join(
                f"{name}: {' '.join(str(e) for e in errors)}"
                for name, errors in form.errors.items()
            ),
        )
    else:
        try:
            rule = checkpoint_rule_save(
                user=request_user(request), project=project, template=template, **form.rule_fields()
            )
        except PortalError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(
                request, "The checkpoint rule is saved." if rule else "The rule is cleared."
            )
    return redirect("project-page", slug=project.slug)
