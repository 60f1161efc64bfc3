"""The admin's goodput report: every project's GPU-hours by part and goodput per week, as CSV,
and the GPU-hours each node's faults cost this month."""

from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, QueryDict
from django.template.response import TemplateResponse
from django.utils import timezone

from monitoring.goodput.efficiency import PARTS
from monitoring.goodput.report import (
    PAGE_WEEKS,
    PART_TITLES,
    GoodputRow,
    cards_in_weeks,
    goodput_rows,
    hours_text,
    iso_week,
    parse_iso_week,
    part_column,
    rows_total,
    share_text,
    week_start,
)
from monitoring.nodes.selectors import month_node_losses, month_start
from portal_lib.csv_cells import SafeCsvWriter
from projects.models import Project

GROUPINGS = {"project": ("project",), "user": ("project", "user")}


class IsoWeekField(forms.CharField):
    widget = forms.TextInput(attrs={"type": "week", "placeholder": "2026-W48"})

    def to_python(self, value: Any) -> date | None:  # type: ignore[override]
        text = super().to_python(value)
        if not text:
            return None
        try:
            return parse_iso_week(text)
        except ValueError as exc:
            raise forms.ValidationError(f"{text!r} is no ISO week: write it as 2026-W48.") from exc


class GoodputFilterForm(forms.Form):
    start = IsoWeekField(required=False, help_text="From this ISO week.")
    end = IsoWeekField(required=False, help_text="To this ISO week (inclusive).")
    project = forms.ModelChoiceField(queryset=Project.objects.order_by("slug"), required=False)
    by = forms.ChoiceField(
        choices=[("project", "project and week"), ("user", "project, user and week")],
        required=False,
        initial="project",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("start"), data.get("end")
        if start and end and end < start:
            raise forms.ValidationError("The last week is before the first: swap them.")
        return data


def report_rows(data: dict[str, Any]) -> list[GoodputRow]:
    """The report's rows for the form's cleaned data: one query."""
    cards = cards_in_weeks(first=data.get("start"), last=data.get("end"))
    if data.get("project") is not None:
        cards = cards.filter(attempt__job__project=data["project"])
    return goodput_rows(cards, by=GROUPINGS[data.get("by") or "project"])


CSV_COLUMNS = [
    "week",
    "week_start",
    "project",
    "user",
    "attempts",
    "charged_gpu_hours",
    *(part_column(part) for part in PARTS),
    "goodput_percent",
    "queued_gpu_hours",
]


def csv_row(row: GoodputRow) -> list[str | int]:
    """A row as the CSV writes it: the same text the page shows."""
    return [
        row.iso_week,
        row.week.isoformat(),
        row.project,
        row.user,
        row.attempts,
        hours_text(row.gpu_hours),
        *(hours_text(row.parts[part]) for part in PARTS),
        share_text(row.goodput),
        hours_text(row.queued_gpu_hours),
    ]


def _csv(rows: list[GoodputRow]) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="goodput.csv"'
    writer = SafeCsvWriter(response)
    writer.writerow(CSV_COLUMNS)
    writer.writerows(csv_row(row) for row in rows)
    return response


def goodput_report_view(model_admin: admin.ModelAdmin) -> Callable[[HttpRequest], HttpResponse]:
    def view(request: HttpRequest) -> HttpResponse:
        if not model_admin.has_view_permission(request):
            raise PermissionDenied
        now = timezone.now()
        last = week_start(timezone.localdate(now))
        defaults = {"start": iso_week(last - timedelta(weeks=PAGE_WEEKS - 1)), "by": "project"}
        form = GoodputFilterForm(request.GET or defaults)
        rows: list[GoodputRow] = []
        if form.is_valid():
            rows = report_rows(form.cleaned_data)
            if request.GET.get("format") == "csv":
                return _csv(rows)
        query = request.GET.copy() if request.GET else QueryDict(mutable=True)
        if not request.GET:
            query.update(defaults)
        query["format"] = "csv"
        by_user = form.is_valid() and form.cleaned_data.get("by") == "user"
        context = {
            **model_admin.admin_site.each_context(request),
            "title": "Goodput report",
            "opts": model_admin.model._meta,
            "form": form,
            "rows": rows,
            "total": rows_total(rows) if rows else None,
            "by_user": by_user,
            "part_titles": PART_TITLES.values(),
            "csv_query": query.urlencode(),
            # Whatever the filter: a node's faults cost every project on its cluster.
            "node_losses": month_node_losses(now=now),
            "month_start": month_start(now),
        }
        return TemplateResponse(request, "admin/monitoring/goodput_report.html", context)

    return view
