from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from accounts.models import AccessChange, ExternalIdentity, PersonalToken
from accounts.sso.access import access_changed_by_admin


@admin.register(PersonalToken)
class PersonalTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix", "user", "scope", "created_at", "expires_at", "revoked_at"]
    list_filter = ["scope"]
    search_fields = ["name", "prefix", "user__username"]
    # The digest is never shown; tokens are made by their users or `manage.py issue_token`.
    fields = (
        "user",
        "name",
        "prefix",
        "scope",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = fields
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[PersonalToken]) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        messages.success(request, f"Revoked {count} token(s); requests with them are refused.")


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    """Who signed in through single sign-on, as their provider knows them (read only: each
    sign-in writes it; disable the portal user to refuse them)."""

    list_display = ["user", "cluster_username", "issuer", "subject", "last_sign_in_at"]
    list_filter = ["issuer"]
    search_fields = ["user__username", "cluster_username", "subject"]
    list_select_related = ["user"]
    fields = (
        "user",
        "issuer",
        "subject",
        "cluster_username",
        "groups",
        "created_at",
        "last_sign_in_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


admin.site.unregister(User)


@admin.register(User)
class PortalUserAdmin(UserAdmin):
    """Django's user admin; ticking or unticking "active" is recorded (AccessChange), so a
    person an admin disabled is never readmitted by a sign-in."""

    def save_model(self, request: HttpRequest, obj: User, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if change and "is_active" in form.changed_data:
            admin_user = request.user if isinstance(request.user, User) else None
            access_changed_by_admin(user=obj, admin=admin_user)


@admin.register(AccessChange)
class AccessChangeAdmin(admin.ModelAdmin):
    """Whose access was taken away or given back, by what and why (read only)."""

    list_display = ["at", "user", "active", "source", "admin", "reason"]
    list_filter = ["source", "active"]
    search_fields = ["user__username", "reason"]
    list_select_related = ["user", "admin"]
    fields = ("user", "at", "active", "source", "admin", "reason")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
