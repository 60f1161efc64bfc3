from django.contrib import admin
from django.http import HttpRequest

from jobs.models import Attempt, Job, JobEvent


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
    list_filter = ["state", "template", "cluster", "project"]
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
