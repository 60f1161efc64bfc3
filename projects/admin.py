from django.contrib import admin

from projects.models import Membership, Project, Quota


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


class QuotaInline(admin.StackedInline):
    model = Quota
    can_delete = False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "slurm_account", "created_at"]
    search_fields = ["slug", "name", "slurm_account"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [QuotaInline, MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["project", "user", "role", "created_at"]
    list_filter = ["role", "project"]
    search_fields = ["project__slug", "user__username", "user__email"]
    list_select_related = ["project", "user"]
    autocomplete_fields = ["user", "project"]


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = [
        "project",
        "gpu_hours_per_period",
        "period",
        "max_concurrent_gpus",
        "max_gpus_per_job",
        "max_wall_time",
    ]
    list_filter = ["period"]
    search_fields = ["project__slug", "project__name"]
    list_select_related = ["project"]
