from django.contrib import admin

from sweeps.models import Sweep, Trial


class TrialInline(admin.TabularInline):
    model = Trial
    extra = 0
    fields = ["number", "state", "params", "nodes", "job", "value", "note"]
    readonly_fields = ["number", "state", "params", "nodes", "job", "value", "note"]


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "user", "state", "sampler", "pruner", "max_trials"]
    list_filter = ["state", "sampler", "pruner"]
    list_select_related = ["project", "user"]
    inlines = [TrialInline]
