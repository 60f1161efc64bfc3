"""The runs table over REST: the page's columns, sort, filters and pages, for notebooks.

The parameters are the page's (`cols`, `sort`, `f` repeated, `page`, `size`) and so is the
query (monitoring.runs.table): a page costs the same few queries at any size.
"""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.views import APIView

from jobs.models import Job
from monitoring.runs.table import (
    BASE_COLUMNS,
    MAX_PAGE_SIZE,
    PAGE_SIZE,
    RunsQuery,
    RunsQueryError,
    cell,
    cell_unit,
    column_title,
    param_keys,
    runs_page,
    runs_query_from,
)
from portal_lib.bounds import INT_MAX
from projects.access import projects_visible_to


class RunsQuerySerializer(serializers.Serializer[Any]):
    """For the schema and for ranges; monitoring.runs.table reads the values."""

    cols = serializers.CharField(
        required=False,
        help_text="Columns, comma-separated: " + ", ".join(BASE_COLUMNS) + ", or p.<setting>. "
        "Default: the page's.",
    )
    sort = serializers.CharField(
        required=False, help_text="A column, `-` first for descending; default -created."
    )
    f = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Filters, repeated: loss_best<2.5, p.lr=0.001, state!=FAILED, name~llama.",
    )
    page = serializers.IntegerField(required=False, min_value=1, max_value=INT_MAX, default=1)
    size = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_PAGE_SIZE, default=PAGE_SIZE
    )


class ColumnSerializer(serializers.Serializer[Any]):
    key = serializers.CharField()
    title = serializers.CharField()


class RunsPageSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField(help_text="Matching runs, counted up to 1,000.")
    count_capped = serializers.BooleanField(help_text="More than `count` match.")
    page = serializers.IntegerField()
    pages = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    sort = serializers.CharField()
    columns = ColumnSerializer(many=True)
    results = serializers.ListField(
        child=serializers.DictField(),
        help_text="One object per run: its id and a value per column (null: none yet); "
        "with the throughput column, its unit too (throughput_unit: tokens/s, samples/s, "
        "steps/s).",
    )


def _units(job: Job, query: RunsQuery) -> dict[str, str]:
    """A rate's unit beside it (tokens/s, samples/s, steps/s): runs log different ones."""
    if "throughput" not in query.columns:
        return {}
    return {"throughput_unit": cell_unit(job, "throughput")}


class ProjectRunsView(APIView):
    @extend_schema(
        operation_id="project_runs",
        parameters=[RunsQuerySerializer],
        responses=RunsPageSerializer,
    )
    def get(self, request: Request, slug: str) -> Response:
        """The project's runs with settings and summary metrics, as its runs table shows them."""
        project = projects_visible_to(user=request.user).filter(slug=slug).first()
        if project is None:
            raise NotFound()
        RunsQuerySerializer(data=request.query_params).is_valid(raise_exception=True)
        keys = param_keys(project=project)
        try:
            query = runs_query_from(request.query_params, param_keys=keys)
        except RunsQueryError as exc:
            raise ValidationError({exc.param: [str(exc)]}) from exc
        page = runs_page(project=project, query=query)
        url = request.build_absolute_uri()
        previous = None
        if page.page > 1:
            previous = replace_query_param(url, "page", page.page - 1)
            if page.page == 2:
                previous = remove_query_param(url, "page")
        data = {
            "count": page.count,
            "count_capped": page.capped,
            "page": page.page,
            "pages": page.pages,
            "next": replace_query_param(url, "page", page.page + 1)
            if page.page < page.pages
            else None,
            "previous": previous,
            "sort": ("-" if query.descending else "") + query.sort,
            "columns": [{"key": c, "title": column_title(c)} for c in query.columns],
            "results": [
                {"id": job.pk, **{c: cell(job, c) for c in query.columns}, **_units(job, query)}
                for job in page.rows
            ],
        }
        return Response(RunsPageSerializer(data).data)
