"""Job pages: the list (with bulk cancel), the submit form with its live preview, cancel."""

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from clusters.inventory import PartitionLimits, cluster_partitions
from clusters.models import Cluster
from clusters.selectors import account_for
from jobs.access import job_for_viewer, jobs_visible_to
from jobs.enums import FINAL_STATES, State
from jobs.errors import JobError
from jobs.estimate import Room, project_room
from jobs.listing import (
    COUNT_CAP,
    SORTS,
    Filters,
    access_for,
    can_cancel_now,
    job_page,
)
from jobs.models import Job
from jobs.preview import estimate_for, script_preview
from jobs.queue.line import jobs_waiting
from jobs.services import job_cancel, job_submit
from jobs.specs import JobSpec, spec_from_job, validate_spec
from portal_lib.bounds import IdOutOfRange, row_id, row_ids
from portal_lib.errors import PortalError, form_add_error
from projects.models import Project, Quota
from web.auth import request_user
from web.jobs.forms import (
    JobForm,
    format_time_limit,
    initial_from_spec,
    project_clusters,
    usable_clusters,
)

MAX_STATE_IDS = 200


@login_required
@require_GET
def job_list(request: HttpRequest) -> HttpResponse:
    """The jobs of the user's projects; a fixed number of queries on any page."""
    user = request_user(request)
    access = access_for(user=user)
    filters = Filters.from_query(request.GET)
    page = job_page(
        access=access,
        filters=filters,
        after=request.GET.get("after", ""),
        before=request.GET.get("before", ""),
    )
    waiting = jobs_waiting(page.jobs)  # no query unless a row waits in its project's line
    for job in page.jobs:
        setattr(job, "waiting", waiting.get(job.pk))  # noqa: B010 (read by the row's template)
    rows = [(job, can_cancel_now(access=access, job=job)) for job in page.jobs]
    return render(
        request,
        "jobs/list.html",
        {
            "page": page,
            "rows": rows,
            "any_cancellable": any(cancellable for _, cancellable in rows),
            "filters": filters,
            "query": filters.as_query(),
            "projects": access.projects,
            "states": [("active", "Active"), ("finished", "Finished"), *State.choices],
            "sorts": _sort_labels(),
            "count_cap": COUNT_CAP,
        },
    )


def _sort_labels() -> list[tuple[str, str]]:
    labels = {
        "newest": "Newest first",
        "oldest": "Oldest first",
        "name": "Name A-Z",
        "-name": "Name Z-A",
        "state": "State A-Z",
        "-state": "State Z-A",
        "gpus": "Fewest GPUs",
        "-gpus": "Most GPUs",
    }
    return [(key, labels[key]) for key in SORTS]


@login_required
@require_POST
def jobs_cancel(request: HttpRequest) -> HttpResponse:
    """Bulk cancel: only the selected jobs the user may cancel; the others are named."""
    user = request_user(request)
    access = access_for(user=user)
    ids = [i for i in map(row_id, request.POST.getlist("job")) if i is not None][:COUNT_CAP]
    jobs = jobs_visible_to(user=user).filter(pk__in=ids)
    cancelled, refused = 0, []
    for job in jobs:
        if not can_cancel_now(access=access, job=job):
            refused.append(f"#{job.pk}")
            continue
        try:
            job_cancel(job=job, user=user)
        except JobError:
            refused.append(f"#{job.pk}")
            continue
        cancelled += 1
    missing = len(set(ids)) - len(jobs)
    if cancelled:
        messages.success(request, f"Cancelling {cancelled} job{'s' if cancelled != 1 else ''}.")
    if refused:
        messages.error(
            request,
            f"Not cancelled (finished, or neither yours nor in a project you own): "
            f"{', '.join(refused)}.",
        )
    if missing > 0:
        messages.error(request, f"{missing} selected job(s) are not in your projects.")
    if not ids:
        messages.error(request, "Select the jobs to cancel first.")
    return HttpResponseRedirect(_safe_next(request, reverse("job-list")))


def _safe_next(request: HttpRequest, default: str) -> str:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return default


@login_required
@require_POST
def job_cancel_view(request: HttpRequest, job_id: int) -> HttpResponse:
    user = request_user(request)
    job = job_for_viewer(user=user, job_id=job_id)
    if job is None:
        raise Http404("No such job, or not one of your projects'.")
    if job.state in FINAL_STATES:
        messages.info(request, f"Job #{job.pk} has already finished ({job.get_state_display()}).")
    else:
        try:
            job_cancel(job=job, user=user)
        except JobError as exc:
            messages.error(request, exc.message)
            return redirect("job-page", job_id=job.pk)
        messages.success(request, f"Cancelling job #{job.pk}.")
    return redirect("job-page", job_id=job.pk)


@login_required
@require_GET
def job_states(request: HttpRequest) -> JsonResponse:
    """Live states for the jobs on a page (the user's projects' only); polled by job-states.js."""
    user = request_user(request)
    try:
        ids = row_ids(request.GET.get("ids", ""), name="ids", limit=MAX_STATE_IDS)
    except IdOutOfRange as exc:
        return JsonResponse({"detail": exc.message, **exc.errors}, status=exc.status)
    rows = jobs_visible_to(user=user).filter(pk__in=ids).values_list("pk", "state")
    labels = dict(State.choices)
    return JsonResponse(
        {
            "jobs": {
                str(pk): {"state": state, "label": labels.get(state, state)} for pk, state in rows
            },
            "final": sorted(FINAL_STATES),
        }
    )


def partitions_for(user: User, cluster: Cluster | None) -> dict[str, PartitionLimits]:
    if cluster is None:
        return {}
    account = account_for(user=user, cluster=cluster)
    return cluster_partitions(cluster=cluster, account=account) if account else {}


def _partition_rows(partitions: dict[str, PartitionLimits]) -> list[dict[str, Any]]:
    return [
        {
            "name": p.name,
            "default": p.is_default,
            "nodes": p.nodes,
            "gpus_per_node": p.gpus_per_node,
            "cpus_per_node": p.cpus_per_node,
            "memory_mb": p.memory_mb_per_node,
            "max_time": format_time_limit(p.max_time) if p.max_time else "unlimited",
        }
        for p in sorted(partitions.values(), key=lambda p: (not p.is_default, p.name))
    ]


@login_required
def job_new(request: HttpRequest) -> HttpResponse:
    """The submit form (GET, `?clone=<id>` prefills it) and the submission (POST).

    `?plan_from=<id>` clones a finished job and shows, beside the estimate, the plan of
    the run being entered from that job's measured throughput (web.jobs.plan).
    """
    user = request_user(request)
    if request.method == "POST":
        form = JobForm(request.POST, request.FILES, user=user)
        if form.is_valid():
            try:
                job = job_submit(
                    user=user,
                    project=form.cleaned_data["project"],
                    cluster=form.cleaned_data["cluster"],
                    spec=form.spec(
                        form.code_fields(user=user, project=form.cleaned_data["project"])
                    ),
                )
            except PortalError as exc:
                form_add_error(form, exc)
            else:
                messages.success(request, f"Job #{job.pk} submitted.")
                return redirect("job-page", job_id=job.pk)
    elif request.method == "GET":
        initial = _initial(request, user)
        if "cpus_per_task" not in initial:
            # Four CPUs, or what the default partition's nodes have if that is fewer.
            default = partitions_for(user, _selected_cluster_named(user, ""))
            cpus = [p.cpus_per_node for p in default.values() if p.is_default and p.cpus_per_node]
            initial["cpus_per_task"] = min([4, *cpus])
        form = JobForm(user=user, initial=initial)
    else:
        return HttpResponse(status=405)
    return render_job_form(request, form, plan_from=_job_named(user, _plan_from(request)))


def render_job_form(request: HttpRequest, form: JobForm, **extra: Any) -> HttpResponse:
    """The submit form's page: a new job's, a clone's, a fork's (web.jobs.lineage)."""
    selected = _selected_cluster(form, form["cluster"].value())
    return render(
        request,
        "jobs/new.html",
        {
            "form": form,
            "partitions": _partition_rows(partitions_for(form.user, selected)),
            "run_base": selected.base_run_dir if selected else "",
            "code_from": _job_named(form.user, form["code_from"].value()),
            "no_projects": not form.fields["project"].queryset.exists(),  # type: ignore[attr-defined]
            **extra,
        },
    )


def _plan_from(request: HttpRequest) -> str:
    """The finished job a plan measures from (the link's, then the form's hidden field)."""
    source = request.POST if request.method == "POST" else request.GET
    return source.get("plan_from", "")


def _initial(request: HttpRequest, user: User) -> dict[str, Any]:
    clone_id = request.GET.get("clone", "") or request.GET.get("plan_from", "")
    if not clone_id:
        return {}
    job_id = row_id(clone_id)
    job = job_for_viewer(user=user, job_id=job_id) if job_id is not None else None
    if job is None:
        raise Http404("No such job to clone, or not one of your projects'.")
    initial = initial_from_spec(spec_from_job(job))
    initial.update(project=job.project_id, cluster=job.cluster.name, name=f"{job.name} copy")
    if job.has_code:
        initial["code_from"] = job.pk
    return initial


def _job_named(user: User, value: Any) -> Job | None:
    """The job an id names, if the user may see it: the code a clone runs, a plan's run."""
    job_id = row_id(str(value or ""))
    return job_for_viewer(user=user, job_id=job_id) if job_id is not None else None


def _selected_cluster(form: JobForm, value: Any) -> Cluster | None:
    return _selected_cluster_named(form.user, value)


def _selected_cluster_named(user: User, value: Any) -> Cluster | None:
    """The cluster the form shows (the first usable one when none is chosen yet)."""
    clusters = usable_clusters(user=user)
    found = clusters.filter(name=value).first() if isinstance(value, str) and value else None
    return found or clusters.first()


@dataclass(frozen=True)
class FormPreview:
    """The submit form's live side, and what a caller may add to it (monitoring's plan)."""

    payload: dict[str, Any]
    project: Project | None
    cluster: Cluster | None
    spec: JobSpec | None  # None while the form has errors
    room: Room | None  # the project's quota and usage, when the estimate read them


def form_preview(request: HttpRequest) -> FormPreview:
    """Errors by field, the batch script and the estimate for the posted form.

    Writes nothing; the script is rendered for an unsaved job. The URL is routed to
    web.jobs.plan, which adds the plan from a measured run.
    """
    user = request_user(request)
    form = JobForm(request.POST, user=user)
    valid = form.is_valid()
    cluster: Cluster | None = form.cleaned_data.get("cluster")
    partitions = partitions_for(user, cluster)
    errors: dict[str, list[str]] = {
        name: [str(message) for message in messages_] for name, messages_ in form.errors.items()
    }
    payload: dict[str, Any] = {
        "cluster": cluster.name if cluster else "",
        "run_base": cluster.base_run_dir if cluster else "",
        "partitions": _partition_rows(partitions),
        "script": "",
        "estimate": None,
    }
    project: Project | None = form.cleaned_data.get("project")
    quota = Quota.objects.filter(project=project).first() if project else None
    spec = form.spec() if valid else form.partial_spec()
    for name, messages_ in validate_spec(spec=spec, partitions=partitions, quota=quota).items():
        if name not in form.errors:
            errors.setdefault(name, []).extend(messages_)
    room = None
    if valid and project is not None and cluster is not None:
        payload["script"] = script_preview(project=project, cluster=cluster, spec=spec)
        others = project_clusters(user=user, project=project)
        room = project_room(project=project)
        payload["estimate"] = estimate_for(
            project=project, cluster=cluster, spec=spec, others=list(others), room=room
        )
    payload["errors"] = errors
    return FormPreview(payload, project, cluster, spec if valid else None, room)
