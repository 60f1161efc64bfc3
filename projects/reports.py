"""The usage report: the ledger filtered by period, project, user and cluster, and as CSV."""

from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from clusters.models import Cluster
from portal_lib.csv_cells import SafeCsvWriter
from projects.models import Project
from projects.periods import period_bounds
from projects.selectors import usage_charges, usage_summary

CSV_COLUMNS = [
    "ended_at",
    "project",
    "user",
    "cluster",
    "job",
    "attempt",
    "slurm_job_id",
    "gpus",
    "cpus",
    "nodes",
    "elapsed_seconds",
    "gpu_hours",
    "cpu_hours",
    "node_hours",
    "cost",
    "source",
]


class UsageFilterForm(forms.Form):
    start = forms.DateField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="From (ended on or after).",
    )
    end = forms.DateField(
        required=False, widget=forms.DateInput(attrs={"type": "date"}), help_text="To (inclusive)."
    )
    project = forms.ModelChoiceField(queryset=Project.objects.all(), required=False)
    user = forms.ModelChoiceField(queryset=User.objects.order_by("username"), required=False)
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("start"), data.get("end")
        if start and end and end < start:
            raise forms.ValidationError("The end date is before the start date: swap them.")
        return data


def _bounds(start: date | None, end: date | None) -> tuple[datetime | None, datetime | None]:
    tz = timezone.get_current_timezone()
    return (
        datetime.combine(start, time.min, tzinfo=tz) if start else None,
        datetime.combine(end + timedelta(days=1), time.min, tzinfo=tz) if end else None,
    )


def usage_report_view(model_admin: admin.ModelAdmin) -> Callable[[HttpRequest], HttpResponse]:
    def view(request: HttpRequest) -> HttpResponse:
        if not model_admin.has_view_permission(request):
            raise PermissionDenied
        if request.GET:
            form = UsageFilterForm(request.GET)
        else:
            month_start, _ = period_bounds("month")
            form = UsageFilterForm({"start": month_start.date().isoformat()})
        charges = None
        if form.is_valid():
            start, end = _bounds(form.cleaned_data["start"], form.cleaned_data["end"])
            charges = usage_charges(
                start=start,
                end=end,
                project_id=getattr(form.cleaned_data["project"], "pk", None),
                user_id=getattr(form.cleaned_data["user"], "pk", None),
                cluster_id=getattr(form.cleaned_data["cluster"], "pk", None),
            )
            if request.GET.get("format") == "csv":
                return _csv(charges)
        rows = usage_summary(charges) if charges is not None else []
        totals = (
            charges.aggregate(
                hours=Sum("gpu_hours"),
                cpu_hours=Sum("cpu_hours"),
                node_hours=Sum("node_hours"),
                cost=Sum("cost"),
            )
            if charges is not None
            else {}
        )
        query = request.GET.copy()
        query["format"] = "csv"
        if not request.GET and form.is_valid():
            query["start"] = form.data["start"]
        context = {
            **model_admin.admin_site.each_context(request),
            "title": "GPU-hour usage report",
            "opts": model_admin.model._meta,
            "form": form,
            "rows": rows,
            "total_hours": totals.get("hours") or Decimal(0),
            "total_cpu_hours": totals.get("cpu_hours") or Decimal(0),
            "total_node_hours": totals.get("node_hours") or Decimal(0),
            "total_cost": totals.get("cost") or Decimal(0),
            "total_attempts": sum(row.attempts for row in rows),
            "csv_query": query.urlencode(),
        }
        return TemplateResponse(request, "admin/projects/usage_report.html", context)

    return view


def _csv(charges: Any) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="gpu-usage.csv"'
    writer = SafeCsvWriter(response)
    writer.writerow(CSV_COLUMNS)
    for charge in charges.order_by("ended_at", "id").iterator(chunk_size=2000):
        writer.writerow(
            [
                charge.ended_at.isoformat(),
                charge.project.slug,
                charge.user.username,
                charge.cluster.name,
                charge.attempt.job_id,
                charge.attempt.number,
                charge.attempt.slurm_job_id,
                charge.gpus,
                charge.cpus,
                charge.nodes,
                charge.elapsed_seconds,
                charge.gpu_hours,
                charge.cpu_hours,
                charge.node_hours,
                charge.cost,
                charge.source,
            ]
        )
    return response
