"""The project's runs table and the compare view (members and staff only)."""

from urllib.parse import urlencode

import orjson
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
from monitoring.runs.compare import MAX_RUNS, RUN_GROUP, compare_chart, settings_diff
from monitoring.runs.compare.series import default_series, logged_series, series_offered
from monitoring.runs.lineage import compare_lineage
from monitoring.runs.step_clock import AXES, AXIS_TITLES, STEP
from monitoring.runs.table import (
    BASE_COLUMNS,
    PARAM_PREFIX,
    UNSORTED,
    RunsQueryError,
    cell,
    cell_unit,
    column_title,
    default_columns,
    runs_page,
    runs_query_from,
    vocabulary,
)
from portal_lib.bounds import IdOutOfRange, row_ids
from projects.access import projects_visible_to
from projects.models import Project

# The compare chart's x slices, each drawn as its minimum and maximum point: chosen by the
# server, not measured by the page, so that the page names its curves' URL in its head and
# the browser asks for them while it loads the scripts (1,000: up to 2,002 points a run,
# a slice about a pixel column wide on a laptop's chart).
DEFAULT_WIDTH = 1000
LABEL_COLUMNS = frozenset({"name", "tags", "group", "user", "state"})  # aligned left
# Ids a compare URL may name: past MAX_RUNS they are read only to say they were left out.
ASKED_MAX = 10 * MAX_RUNS


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
        {
            "job": job,
            "cells": [
                {"key": c, "value": cell(job, c), "unit": cell_unit(job, c)} for c in query.columns
            ],
        }
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


def _selected(request: HttpRequest, project: Project) -> tuple[list[int], list[Job]]:
    """The URL's run ids, and the first MAX_RUNS of them that are the project's runs, in
    the URL's order; IdOutOfRange for a 30-digit id."""
    asked = row_ids(request.GET.get("runs", ""), name="runs", limit=ASKED_MAX)
    ids = asked[:MAX_RUNS]
    found = {
        job.pk: job
        for job in Job.objects.filter(project=project, pk__in=ids).only(
            "id", "name", "params", "group"
        )
    }
    return asked, [found[i] for i in ids if i in found]


def _axis(request: HttpRequest) -> str:
    """The chart's x axis: step, elapsed (since the run's start) or wall (clock time)."""
    axis = request.GET.get("axis", STEP)
    return axis if axis in AXES else STEP


@login_required
@require_GET
def compare_page(request: HttpRequest, slug: str) -> HttpResponse:
    """Chosen runs overlaid; the runs, series, axis, grouping and scales live in the URL."""
    project = _project(request, slug)
    try:
        asked, jobs = _selected(request, project)
    except IdOutOfRange as exc:
        return HttpResponseBadRequest(exc.message, content_type="text/plain; charset=utf-8")
    series = series_offered(logged_series(job_ids=[job.pk for job in jobs]))
    keys = sorted({key for job in jobs for key in (job.params or {})})
    axis = _axis(request)
    metric = request.GET.get("metric") or default_series(series)
    group = request.GET.get("group", "")
    # The curves' query, the head's preload: what the form holds, as compare.js asks.
    curves = {
        "runs": ",".join(map(str, asked)),
        "metric": metric,
        # A group that is none of the select's options shows as "(each run)".
        "group": group if group == RUN_GROUP or group in keys else "",
        "axis": axis,
        "width": str(DEFAULT_WIDTH),
    }
    return render(
        request,
        "monitoring/compare.html",
        {
            "project": project,
            "jobs": jobs,
            "metric": metric,
            "series": series,
            "metric_offered": any(s.name == metric for s in series),
            "group": group,
            "log": request.GET.get("log") == "1",
            "smooth": _smoothing(request),
            "axis": axis,
            "axis_title": AXIS_TITLES[axis],
            "axes": AXIS_TITLES,
            "keys": keys,
            "run_group": RUN_GROUP,
            "has_run_groups": any(job.group for job in jobs),
            "diff": settings_diff(jobs),
            "lineage": compare_lineage(jobs=jobs),
            "max_runs": MAX_RUNS,  # the empty page's hint: how many may be ticked
            # Every id asked for, so that the runs left out stay named after "Show".
            "runs": curves["runs"],
            "curves_query": urlencode(curves),
        },
    )


def _smoothing(request: HttpRequest) -> str:
    """The smoothing weight of the URL as the slider takes it (0 to 0.99), "" for none."""
    try:
        alpha = float(request.GET.get("smooth", ""))
    except ValueError:
        return ""
    return f"{alpha:.2f}" if 0 < alpha < 1 else ""


@login_required
@require_GET
def compare_curves(request: HttpRequest, slug: str) -> HttpResponse:
    """The curves (and group bands) of the compare chart, downsampled to its width, and the
    chosen runs it leaves out, each with why."""
    project = _project(request, slug)
    try:
        asked, jobs = _selected(request, project)
    except IdOutOfRange as exc:
        return JsonResponse({"detail": exc.message, **exc.errors}, status=exc.status)
    try:
        width = int(request.GET.get("width") or DEFAULT_WIDTH)
    except ValueError:
        width = DEFAULT_WIDTH
    body = compare_chart(
        asked=asked,
        limit=MAX_RUNS,
        jobs=jobs,
        metric=request.GET.get("metric", "loss")[:200],
        width=width,
        axis=_axis(request),
        group=request.GET.get("group", ""),
    )
    # orjson: 20 runs' 80,000 floats in a few ms, where json takes 50; numpy's scalars too.
    data = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
    return HttpResponse(data, content_type="application/json")
