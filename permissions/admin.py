from __future__ import annotations

from typing import Any, cast

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest

from permissions.members.services import invite_revoke
from permissions.models import ApiToken, ExternalIdentity, Group, GroupMembership, Invite, Team, User
from permissions.services import api_token_create, api_tokens_revoke


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    fields = ["name", "example_questions"]


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    list_display = ["username", "email", "team", "role", "is_staff", "is_active", "last_login"]
    list_filter = ["team", "role", "is_staff", "is_active"]
    # django-stubs give UserAdmin the Optional fieldsets of ModelAdmin; Django's UserAdmin sets a tuple.
    fieldsets = cast(tuple, BaseUserAdmin.fieldsets) + (("Cairn", {"fields": ("team", "role")}),)
    add_fieldsets = BaseUserAdmin.add_fieldsets + (("Cairn", {"fields": ("team", "role")}),)


class GroupMembershipInline(admin.TabularInline):
    model = GroupMembership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Group)
class GroupAdmin(admin.ModelAdmin):
    list_display = ["name", "team"]
    list_filter = ["team"]
    inlines = [GroupMembershipInline]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created here with the secret shown once; only prefix and digest are stored."""

    list_display = ["prefix", "user", "name", "scope", "created_at", "expires_at", "revoked_at", "last_used_at"]
    list_filter = ["scope"]
    search_fields = ["prefix", "user__username", "name"]
    fields = ["user", "name", "scope", "expires_at", "prefix", "parent", "created_at", "revoked_at", "last_used_at"]
    readonly_fields = ["prefix", "parent", "created_at", "revoked_at", "last_used_at"]
    autocomplete_fields = ["user"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        return [*self.readonly_fields, "user"] if obj else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        issued = api_token_create(user=obj.user, scope=obj.scope, name=obj.name, expires_at=obj.expires_at)
        obj.pk = issued.token.pk
        obj.prefix, obj.digest = issued.token.prefix, issued.token.digest
        messages.warning(request, f"New API token (copy it now, it will not be shown again): {issued.plaintext}")

    @admin.action(description="Revoke selected tokens (and the tokens created from them)")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = api_tokens_revoke(tokens=queryset)
        self.message_user(request, f"Revoked {count} token(s).")


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    """Links to single sign-on accounts: delete one to unlink, add one to link an account sign-in will not link itself."""

    list_display = ["user", "subject", "issuer", "created_at"]
    search_fields = ["user__username", "subject"]
    fields = ["user", "issuer", "subject", "created_at"]
    readonly_fields = ["created_at"]
    autocomplete_fields = ["user"]


@admin.register(Invite)
class InviteAdmin(admin.ModelAdmin):
    """Invites are created on /team/members, by invites.create or `manage.py invite`, where their link is shown
    once; here they are listed and revoked."""

    list_display = ["team", "email", "role", "status", "created_by", "created_at", "expires_at", "accepted_by"]
    list_filter = ["team", "role"]
    search_fields = ["email"]
    fields = readonly_fields = (
        "team",
        "email",
        "role",
        "created_by",
        "created_at",
        "expires_at",
        "accepted_at",
        "accepted_by",
        "revoked_at",
    )
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke selected invites (those not accepted)")
    def revoke(self, request: HttpRequest, queryset: QuerySet[Invite]) -> None:
        revoked = [invite_revoke(invite=invite) for invite in queryset.filter(accepted_at__isnull=True)]
        self.message_user(request, f"Revoked {len(revoked)} invite(s).")
