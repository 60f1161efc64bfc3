"""The project's runs table and the compare view (members and staff only)."""

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
    QueryDict,
)
from django.shortcuts import render
from django.views.decorators.http import require_GET

from jobs.models import Job
from monitoring.models import RunSummary
from monitoring.runs.compare import MAX_RUNS, curves_read, group_bands, settings_diff, y_range
from monitoring.runs.step_clock import AXES, AXIS_TITLES, STEP
from monitoring.runs.table import (
    BASE_COLUMNS,
    PARAM_PREFIX,
    UNSORTED,
    RunsQueryError,
    cell,
    column_title,
    default_columns,
    runs_page,
    runs_query_from,
    vocabulary,
)
from portal_lib.bounds import IdOutOfRange, row_ids
from projects.access import projects_visible_to
from projects.models import Project

DEFAULT_WIDTH = 900
LABEL_COLUMNS = frozenset({"name", "tags", "group", "user", "state"})  # aligned left
# Compare's "group by" for the runs' own group (their notes), not a setting: no setting's
# name starts with "@" (jobs.params).
RUN_GROUP = "@group"


def _project(request: HttpRequest, slug: str) -> Project:
    project = projects_visible_to(user=request.user).filter(slug=slug).first()
    if project is None:
        raise Http404("No such project, or you are not one of its members.")
    return project


def _with(query: QueryDict, **changes: str) -> str:
    """The query string with some keys replaced: every link keeps the table's state."""
    copy = query.copy()
    for key, value in changes.items():
        copy[key] = value
    return copy.urlencode()


@login_required
@require_GET
def runs_table(request: HttpRequest, slug: str) -> HttpResponse:
    """Runs with settings and summary metrics: columns, sort, filters and page in the URL."""
    project = _project(request, slug)
    named = vocabulary(project=project)
    keys = named.param_keys
    error = ""
    try:
        query = runs_query_from(request.GET, param_keys=keys)
    except RunsQueryError as exc:
        error = str(exc)
        query = runs_query_from(QueryDict(), param_keys=keys)
    page = runs_page(project=project, query=query)
    sort = ("-" if query.descending else "") + query.sort
    headers = [
        {
            "key": column,
            "title": column_title(column),
            "sorts": column not in UNSORTED,
            "numeric": column not in LABEL_COLUMNS,
            "sorted": column == query.sort,
            "descending": query.descending,
            "link": _with(
                request.GET,
                sort=("" if column == query.sort and query.descending else "-") + column,
                page="1",
            ),
        }
        for column in query.columns
    ]
    rows = [
        {"job": job, "cells": [{"key": c, "value": cell(job, c)} for c in query.columns]}
        for job in page.rows
    ]
    offered = [*BASE_COLUMNS, *(PARAM_PREFIX + k for k in keys)]
    return render(
        request,
        "monitoring/runs.html",
        {
            "project": project,
            "headers": headers,
            "rows": rows,
            "page": page,
            "columns": query.columns,
            "offered": [{"key": c, "title": column_title(c)} for c in offered],
            "filters": request.GET.getlist("f"),
            # The quick filters: each adds f=tags=<tag> or f=group=<group> to the table's URL.
            "tags": named.tags,
            "groups": named.groups,
            "base_query": _with(request.GET, page="1"),
            "sort": sort,
            "error": error,
            "defaults": ",".join(default_columns(keys)),
            "prev": _with(request.GET, page=str(page.page - 1)) if page.page > 1 else "",
            "next": _with(request.GET, page=str(page.page + 1)) if page.page < page.pages else "",
        },
    )


def _selected(request: HttpRequest, project: Project) -> list[Job]:
    """The chosen runs of the project, in the URL's order; IdOutOfRange for a 30-digit id."""
    ids = row_ids(request.GET.get("runs", ""), name="runs", limit=MAX_RUNS)
    found = {
        job.pk: job
        for job in Job.objects.filter(project=project, pk__in=ids).only(
            "id", "name", "params", "group"
        )
    }
    return [found[i] for i in ids if i in found]


def _axis(request: HttpRequest) -> str:
    """The chart's x axis: step, elapsed (since the run's start) or wall (clock time)."""
    axis = request.GET.get("axis", STEP)
    return axis if axis in AXES else STEP


@login_required
@require_GET
def compare_page(request: HttpRequest, slug: str) -> HttpResponse:
    """Chosen runs overlaid; the runs, metric, axis and grouping live in the URL."""
    project = _project(request, slug)
    try:
        jobs = _selected(request, project)
    except IdOutOfRange as exc:
        return HttpResponseBadRequest(exc.message, content_type="text/plain; charset=utf-8")
    names: set[str] = set()
    for metrics in RunSummary.objects.filter(job__in=jobs).values_list("metrics", flat=True):
        names.update(metrics or {})
    keys = sorted({key for job in jobs for key in (job.params or {})})
    axis = _axis(request)
    metric = request.GET.get("metric") or (
        "loss" if "loss" in names or not names else sorted(names)[0]
    )
    return render(
        request,
        "monitoring/compare.html",
        {
            "project": project,
            "jobs": jobs,
            "metric": metric,
            "metrics": sorted(names),
            "group": request.GET.get("group", ""),
            "log": request.GET.get("log") == "1",
            "axis": axis,
            "axis_title": AXIS_TITLES[axis],
            "axes": AXIS_TITLES,
            "keys": keys,
            "run_group": RUN_GROUP,
            "has_run_groups": any(job.group for job in jobs),
            "diff": settings_diff(jobs),
            "runs": ",".join(str(job.pk) for job in jobs),
        },
    )


@login_required
@require_GET
def compare_curves(request: HttpRequest, slug: str) -> JsonResponse:
    """The curves (and group bands) of the compare chart, downsampled to its width."""
    project = _project(request, slug)
    try:
        jobs = _selected(request, project)
    except IdOutOfRange as exc:
        return JsonResponse({"detail": exc.message, **exc.errors}, status=exc.status)
    metric = request.GET.get("metric", "loss")[:200]
    try:
        width = int(request.GET.get("width") or DEFAULT_WIDTH)
    except ValueError:
        width = DEFAULT_WIDTH
    axis = _axis(request)
    curves = curves_read(jobs=jobs, metric=metric, width=width, axis=axis)
    names = {job.pk: job.name for job in jobs}
    runs = []
    for c in curves:
        xs, ys = c.with_gaps()  # y null where the value was NaN or infinite
        runs.append(
            {
                "id": c.job_id,
                "name": names[c.job_id],
                "x": xs,
                "y": ys,
                "nonfinite": c.nonfinite,
                "total": c.total,
            }
        )
    fitted = y_range(curves)
    body: dict[str, Any] = {
        "metric": metric,
        "axis": axis,
        "runs": runs,
        # The default y range when a run is orders of magnitude off the others; null: autorange.
        "y_range": None
        if fitted is None
        else {
            "range": [fitted.low, fitted.high],
            "off": [{"id": job, "name": names[job], "value": v} for job, v in fitted.off],
        },
    }
    group = request.GET.get("group", "")
    if group:
        labels = {job.pk: _group_label(job, group) for job in jobs}
        body["groups"] = group_bands(curves, labels, width=width)
    return JsonResponse(body)


def _group_label(job: Job, group: str) -> Any:
    """The run's value for compare's grouping: a setting's, or its own group (a run without
    one stands alone, named, rather than being averaged with the other loose runs)."""
    if group == RUN_GROUP:
        return job.group or f"{job.name} #{job.pk}"
    return (job.params or {}).get(group)
