from django.contrib import admin

from accounts.models import PersonalToken


@admin.register(PersonalToken)
class PersonalTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix", "user", "scope", "created_at", "expires_at", "revoked_at"]
    list_filter = ["scope"]
    search_fields = ["name", "prefix", "user__username"]
    # The digest is never shown; tokens are made by their users or `manage.py issue_token`.
    fields = ("user", "name", "prefix", "scope", "created_at", "expires_at", "last_used_at")
    readonly_fields = fields

    def has_add_permission(self, request: object) -> bool:
        return False
