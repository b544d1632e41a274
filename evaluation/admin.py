from django.contrib import admin

from .models import HardwareProfile, Operator, OperatorHidden, Release, ReleaseHidden, Shape


@admin.register(HardwareProfile)
class HardwareProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "arch", "hbm_bytes_per_s", "launch_floor_s", "queue")


class OperatorInline(admin.TabularInline):
    model = Operator
    fields = ("name",)
    extra = 0
    show_change_link = True


@admin.register(Release)
class ReleaseAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "dsl", "dsl_ratio_threshold", "imported_at")
    # The fallback policy changes scores: it is set on the release's weights page, which
    # rescores every submission (and writes the audit log); not editable here.
    readonly_fields = ("content_sha256", "imported_at", "fallback_scores_zero")
    inlines = [OperatorInline]


@admin.register(ReleaseHidden)
class ReleaseHiddenAdmin(admin.ModelAdmin):
    list_display = ("release",)


@admin.register(Operator)
class OperatorAdmin(admin.ModelAdmin):
    list_display = ("name", "release")
    list_filter = ("release",)


@admin.register(OperatorHidden)
class OperatorHiddenAdmin(admin.ModelAdmin):
    list_display = ("operator", "atol", "rtol")


@admin.register(Shape)
class ShapeAdmin(admin.ModelAdmin):
    list_display = ("shape_id", "operator", "position")
    list_filter = ("operator__release", "operator__name")
