from typing import Any

from django.contrib import admin, messages

from portal import derived_cache
from portal.audit.models import audit

from .models import ApiToken, Membership, PendingTeam, Team, TeamInvite
from .signup import SignupRefused, signup_activate


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
    list_display = ("team", "created_by", "created_at", "expires_at", "uses", "max_uses",
                    "revoked_at")
    readonly_fields = ("code", "created_at", "uses")
    list_filter = ("team",)


@admin.action(description="Activate: make each team, let its owner sign in")
def activate_pending(modeladmin: Any, request: Any, queryset: Any) -> None:
    for pending in queryset.select_related("user"):
        try:
            team = signup_activate(user=pending.user, actor=request.user)
        except SignupRefused as exc:
            modeladmin.message_user(request, f"{pending.user}: {exc}", messages.ERROR)
        else:
            modeladmin.message_user(request, f"{pending.user} activated, team {team} made")


@admin.register(PendingTeam)
class PendingTeamAdmin(admin.ModelAdmin[PendingTeam]):
    """Accounts under approval that asked for a team of their own (ATREX_SIGNUP=approval)."""

    list_display = ("team_name", "user", "requested_at")
    readonly_fields = ("user", "team_name", "requested_at")
    actions = [activate_pending]
