from django.contrib import admin

from .models import ApiToken, Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "daily_submission_quota", "concurrent_job_quota", "hidden")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("team", "user", "role", "joined_at")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("team", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "digest", "created_at", "last_used_at")
