from django.contrib import admin
from django.http import HttpRequest

from jobs.models import Attempt, CodeSnapshot, CodeSnapshotRemoval, Job, JobEvent


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    can_delete = False
    readonly_fields = fields = (
        "number",
        "uuid",
        "account",
        "run_dir",
        "slurm_job_id",
        "state",
        "node_list",
        "exit_code",
        "submitted_at",
        "started_at",
        "ended_at",
        "reason",
    )


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    readonly_fields = fields = ("time", "attempt", "from_state", "to_state", "reason")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "project", "user", "cluster", "template", "state", "created_at"]
    list_filter = ["state", "template", "preflight", "cluster", "project"]
    search_fields = ["name", "command", "user__username", "project__slug"]
    list_select_related = ["project", "user", "cluster"]
    date_hierarchy = "created_at"
    raw_id_fields = ["project", "user", "cluster"]
    inlines = [AttemptInline, JobEventInline]


@admin.register(Attempt)
class AttemptAdmin(admin.ModelAdmin):
    list_display = ["job", "number", "slurm_job_id", "state", "node_list", "exit_code"]
    list_filter = ["state"]
    search_fields = ["slurm_job_id", "uuid", "job__name"]
    list_select_related = ["job"]
    raw_id_fields = ["job"]
    readonly_fields = ["uuid"]


class RecordAdmin(admin.ModelAdmin):
    """Rows the portal writes itself: viewable, never edited by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(CodeSnapshot)
class CodeSnapshotAdmin(RecordAdmin):
    list_display = ["sha256", "project", "size", "created_by", "created_at", "last_used_at"]
    list_filter = ["project"]
    search_fields = ["sha256", "project__slug", "created_by__username"]
    list_select_related = ["project", "created_by"]


@admin.register(CodeSnapshotRemoval)
class CodeSnapshotRemovalAdmin(RecordAdmin):
    list_display = [
        "removed_at",
        "sha256",
        "project",
        "size",
        "last_used_at",
        "removed_by",
        "file_removed",
    ]
    list_filter = ["project", "file_removed"]
    search_fields = ["sha256", "project__slug"]
    list_select_related = ["project", "removed_by"]
    date_hierarchy = "removed_at"
