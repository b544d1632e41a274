from typing import Any

from django.contrib import admin

from portal import derived_cache
from portal.audit.models import audit

from .models import ApiToken, Membership, Team, TeamInvite


def _set_hidden(request: Any, queryset: Any, hidden: bool) -> None:
    for team in queryset:
        audit(actor=request.user, action="team.hide" if hidden else "team.show",
              target=f"team:{team.slug}", before={"hidden": team.hidden}, after={"hidden": hidden})
    queryset.update(hidden=hidden)
    derived_cache.changed(derived_cache.BOARDS)


@admin.action(description="Hide from public boards")
def hide_teams(modeladmin: Any, request: Any, queryset: Any) -> None:
    _set_hidden(request, queryset, True)


@admin.action(description="Show on public boards")
def show_teams(modeladmin: Any, request: Any, queryset: Any) -> None:
    _set_hidden(request, queryset, False)


class MembershipInline(admin.TabularInline[Membership, Team]):
    model = Membership
    extra = 0


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin[Team]):
    list_display = ("name", "slug", "daily_submission_quota", "daily_check_quota",
                    "concurrent_job_quota", "share_links_enabled", "hidden")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [MembershipInline]
    actions = [hide_teams, show_teams]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin[Membership]):
    list_display = ("team", "user", "role", "joined_at")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    list_display = ("team", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "digest", "created_at", "last_used_at")


@admin.register(TeamInvite)
class TeamInviteAdmin(admin.ModelAdmin[TeamInvite]):
    list_display = ("team", "created_by", "created_at", "expires_at", "revoked_at")
    readonly_fields = ("code", "created_at")
    list_filter = ("team",)
