"""Admin pages of monitoring: the efficiency cards (read-only), the goodput report, alerts."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse

from monitoring.goodput.admin_report import goodput_report_view
from monitoring.models import Alert, AlertRule, EfficiencyCard, GoodputDigest
from projects.admin import ReadOnlyAdmin


@admin.register(EfficiencyCard)
class EfficiencyCardAdmin(ReadOnlyAdmin):
    list_display = [
        "attempt",
        "ended_at",
        "gpu_hours",
        "productive_gpu_hours",
        "hung_gpu_hours",
        "idle_gpu_hours",
        "lost_gpu_hours",
        "from_ledger",
    ]
    list_filter = ["from_ledger", "attempt__job__project"]
    list_select_related = ["attempt__job"]
    search_fields = ["attempt__job__project__slug", "attempt__job__user__username"]
    date_hierarchy = "ended_at"
    exclude = ["data"]
    change_list_template = "admin/monitoring/efficiencycard/change_list.html"

    def get_urls(self) -> list[URLPattern]:
        report = path(
            "goodput/",
            self.admin_site.admin_view(goodput_report_view(self)),
            name="monitoring_goodput_report",
        )
        return [report, *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        extra = {
            "report_url": reverse("admin:monitoring_goodput_report"),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra)


@admin.register(GoodputDigest)
class GoodputDigestAdmin(ReadOnlyAdmin):
    list_display = ["week", "project", "recipients", "sent_at"]
    list_filter = ["project"]
    list_select_related = ["project"]


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    list_display = ["owner", "kind", "series", "project", "to_mail", "enabled"]
    list_filter = ["kind", "enabled"]
    list_select_related = ["owner", "project"]
    search_fields = ["owner__username", "project__slug"]


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin):
    list_display = ["fired_at", "user", "job", "kind", "message", "webhook_error"]
    list_filter = ["kind"]
    list_select_related = ["user", "job"]
    search_fields = ["user__username", "message"]
    date_hierarchy = "fired_at"
