"""Admin pages for projects: budgets with usage, audited quota edits, the ledger and its report."""

from decimal import Decimal
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth.models import User
from django.db.models import Count, QuerySet
from django.forms import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join

from clusters.models import Cluster
from projects.audit import quota_changes_record, quota_snapshot
from projects.mirror import MirrorError, mirror_apply, mirror_plan
from projects.models import (
    BudgetAlert,
    IdlePolicy,
    Membership,
    NotificationPreference,
    Project,
    Quota,
    QuotaChange,
    Reservation,
    UsageCharge,
)
from projects.quota import fmt_hours
from projects.reports import usage_report_view
from projects.selectors import Usage, projects_usage
from projects.storage import CodeStorage, project_code_storage, projects_code_storage


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


class QuotaInline(admin.StackedInline):
    model = Quota
    can_delete = False
    filter_horizontal = ["allowed_clusters"]


class IdlePolicyInline(admin.StackedInline):
    model = IdlePolicy
    can_delete = True
    extra = 0


class UsageChangeList(ChangeList):
    """The page's projects' usage in four queries, whatever the page size."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        usages = projects_usage(projects=self.result_list)
        storages = projects_code_storage(projects=self.result_list)
        for project in self.result_list:
            project.usage = usages[project.pk]
            project.code_storage = storages[project.pk]


def _editor(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None


def _usage(project: Project) -> Usage | None:
    return getattr(project, "usage", None)


def _hours(value: Decimal) -> str:
    return fmt_hours(value)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = [
        "slug",
        "name",
        "slurm_account",
        "member_count",
        "budget",
        "used",
        "reserved",
        "left",
        "used_bar",
        "code_storage",
    ]
    search_fields = ["slug", "name", "slurm_account"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [QuotaInline, IdlePolicyInline, MembershipInline]
    readonly_fields = ["code_storage", "slurm_mirror"]
    actions = ["mirror_quota"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Project]:
        return super().get_queryset(request).annotate(member_total=Count("memberships"))

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return UsageChangeList

    @admin.display(description="members", ordering="member_total")
    def member_count(self, project: Project) -> int:
        return getattr(project, "member_total", 0)

    @admin.display(description="budget (GPU-h)")
    def budget(self, project: Project) -> str:
        usage = _usage(project)
        if usage is None or not usage.has_quota:
            return "no quota"
        return f"{_hours(usage.budget_gpu_hours)} / {usage.period}"

    @admin.display(description="used")
    def used(self, project: Project) -> str:
        usage = _usage(project)
        return _hours(usage.used_gpu_hours) if usage else "-"

    @admin.display(description="reserved")
    def reserved(self, project: Project) -> str:
        usage = _usage(project)
        return _hours(usage.reserved_gpu_hours) if usage else "-"

    @admin.display(description="left")
    def left(self, project: Project) -> str:
        usage = _usage(project)
        return _hours(usage.left_gpu_hours) if usage else "-"

    @admin.display(description="used this period")
    def used_bar(self, project: Project) -> str:
        usage = _usage(project)
        if usage is None or not usage.has_quota:
            return "-"
        percent = min(usage.percent_used, 100)
        colour = "#ba2121" if percent >= 100 else "#d08000" if percent >= 80 else "#417690"
        return format_html(
            '<span class="usage-bar" title="{} %" style="display:inline-block;width:120px;'
            'height:10px;background:#ddd;vertical-align:middle"><span style="display:block;'
            'height:10px;width:{}%;background:{}"></span></span> {} %',
            usage.percent_used,
            percent,
            colour,
            usage.percent_used,
        )

    @admin.display(description="code snapshots")
    def code_storage(self, project: Project) -> str:
        # The list sets each row's in one query; the change form asks for its one project.
        storage: CodeStorage | None = getattr(project, "code_storage", None)
        if storage is None and project.pk is not None:
            storage = project_code_storage(project=project)
        return storage.summary if storage else "-"

    @admin.display(description="Slurm mirror (dry run)")
    def slurm_mirror(self, project: Project) -> str:
        if project.pk is None:
            return "-"
        plan = mirror_plan(project=project, quota=Quota.objects.filter(project=project).first())
        if plan.why_not:
            return plan.why_not
        clusters = list(Cluster.objects.filter(mirror_quotas=True).values_list("name", flat=True))
        where = (
            f"Applied on: {', '.join(clusters)} (when the quota is saved, or with the "
            "'Mirror quota into Slurm' action)."
            if clusters
            else "No cluster has quota mirroring switched on: nothing is applied."
        )
        return format_html("<pre>{}</pre><p>{}</p>", "\n".join(plan.commands), where)

    def save_formset(
        self, request: HttpRequest, form: Any, formset: BaseInlineFormSet, change: bool
    ) -> None:
        if formset.model is not Quota:
            super().save_formset(request, form, formset, change)
            return
        before = {
            quota.pk: (
                quota_snapshot(quota),
                list(quota.allowed_clusters.values_list("name", flat=True)),
            )
            for quota in Quota.objects.filter(project=form.instance)
        }
        super().save_formset(request, form, formset, change)
        for quota in Quota.objects.filter(project=form.instance):
            snapshot, clusters = before.get(
                quota.pk, ({name: None for name in quota_snapshot(quota)}, [])
            )
            if quota_changes_record(
                quota=quota,
                user=_editor(request),
                before=snapshot,
                clusters_before=clusters,
            ):
                _mirror_after_save(request, quota.project)

    @admin.action(description="Mirror quota into Slurm (sacctmgr) on clusters that mirror")
    def mirror_quota(self, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        clusters = list(Cluster.objects.filter(mirror_quotas=True))
        if not clusters:
            self.message_user(
                request,
                "No cluster has quota mirroring switched on (Clusters > mirror quotas into Slurm).",
                messages.WARNING,
            )
            return
        for project in queryset:
            _mirror(request, project, clusters)


def _mirror(request: HttpRequest, project: Project, clusters: list[Cluster]) -> None:
    for cluster in clusters:
        try:
            commands = mirror_apply(project=project, cluster=cluster)
        except MirrorError as exc:
            messages.error(request, f"{project.slug} on {cluster.name}: {exc}")
        else:
            messages.success(
                request, f"{project.slug} on {cluster.name}: ran {'; '.join(commands)}"
            )


def _mirror_after_save(request: HttpRequest, project: Project) -> None:
    clusters = list(Cluster.objects.filter(mirror_quotas=True))
    if clusters:
        _mirror(request, project, clusters)


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = [
        "project",
        "gpu_hours_per_period",
        "cpu_hours_per_period",
        "node_hours_per_period",
        "period",
        "max_concurrent_gpus",
        "max_concurrent_jobs",
        "max_gpus_per_job",
        "max_wall_time",
        "allowed_partitions",
    ]
    list_filter = ["period"]
    search_fields = ["project__slug", "project__name"]
    list_select_related = ["project"]
    filter_horizontal = ["allowed_clusters"]
    readonly_fields = ["history"]

    @admin.display(description="history (who changed what, when)")
    def history(self, quota: Quota) -> str:
        if quota.pk is None:
            return "-"
        changes = QuotaChange.objects.filter(quota=quota).select_related("user")[:50]
        if not changes:
            return "No changes recorded yet."
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    f"{change.at:%Y-%m-%d %H:%M:%S}",
                    change.user or "-",
                    change.field,
                    change.old_value or "(blank)",
                    change.new_value or "(blank)",
                )
                for change in changes
            ),
        )
        return format_html(
            '<table class="quota-history"><thead><tr><th>when</th><th>who</th><th>limit</th>'
            "<th>old</th><th>new</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )

    def save_model(self, request: HttpRequest, obj: Quota, form: Any, change: bool) -> None:
        stored = Quota.objects.filter(pk=obj.pk).first() if change else None
        request._quota_before = (  # type: ignore[attr-defined]
            quota_snapshot(stored) if stored else {name: None for name in quota_snapshot(obj)},
            list(stored.allowed_clusters.values_list("name", flat=True)) if stored else [],
        )
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        before, clusters = request._quota_before  # type: ignore[attr-defined]
        if quota_changes_record(
            quota=form.instance,
            user=_editor(request),
            before=before,
            clusters_before=clusters,
        ):
            _mirror_after_save(request, form.instance.project)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records written by the portal itself: viewable, never edited by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(QuotaChange)
class QuotaChangeAdmin(ReadOnlyAdmin):
    list_display = ["at", "project", "user", "field", "old_value", "new_value"]
    list_filter = ["field", "quota__project"]
    search_fields = ["quota__project__slug", "user__username"]
    list_select_related = ["quota__project", "user"]
    date_hierarchy = "at"

    @admin.display(description="project", ordering="quota__project__slug")
    def project(self, change: QuotaChange) -> str:
        return change.quota.project.slug


@admin.register(UsageCharge)
class UsageChargeAdmin(ReadOnlyAdmin):
    list_display = [
        "ended_at",
        "project",
        "user",
        "cluster",
        "attempt",
        "gpus",
        "elapsed_seconds",
        "gpu_hours",
        "cpu_hours",
        "node_hours",
        "cost",
        "source",
    ]
    list_filter = ["project", "cluster", "source", "ended_at"]
    search_fields = ["project__slug", "user__username", "cluster__name"]
    list_select_related = ["project", "user", "cluster", "attempt__job"]
    date_hierarchy = "ended_at"
    change_list_template = "admin/projects/usagecharge/change_list.html"

    def get_urls(self) -> list[URLPattern]:
        report = path(
            "report/",
            self.admin_site.admin_view(usage_report_view(self)),
            name="projects_usagecharge_report",
        )
        return [report, *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        extra = {
            "report_url": reverse("admin:projects_usagecharge_report"),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra)


@admin.register(Reservation)
class ReservationAdmin(ReadOnlyAdmin):
    list_display = [
        "attempt",
        "project",
        "gpus",
        "gpu_hours",
        "cpu_hours",
        "node_hours",
        "created_at",
        "ended_at",
        "released_at",
    ]
    list_filter = ["project"]
    list_select_related = ["attempt__job", "project"]


@admin.register(BudgetAlert)
class BudgetAlertAdmin(ReadOnlyAdmin):
    list_display = ["project", "threshold", "period_start", "used_gpu_hours", "sent_at"]
    list_filter = ["project", "threshold"]
    list_select_related = ["project"]


@admin.register(NotificationPreference)
class NotificationPreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "mail_on_job_end"]
    list_filter = ["mail_on_job_end"]
    autocomplete_fields = ["user"]
    list_select_related = ["user"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["project", "user", "role", "created_at"]
    list_filter = ["role", "project"]
    search_fields = ["project__slug", "user__username", "user__email"]
    list_select_related = ["project", "user"]
    autocomplete_fields = ["user", "project"]
