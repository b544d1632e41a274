from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import (
    HardwareProfile,
    HardwareProfileVersion,
    Operator,
    OperatorHidden,
    Release,
    ReleaseHidden,
    Shape,
)


class HardwareProfileVersionInline(admin.TabularInline[HardwareProfileVersion, HardwareProfile]):
    model = HardwareProfileVersion
    fields = ("version", "created_at", "author", "note", "arch", "peak_flops",
              "hbm_bytes_per_s", "launch_floor_s")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(HardwareProfile)
class HardwareProfileAdmin(admin.ModelAdmin[HardwareProfile]):
    list_display = ("name", "version", "arch", "hbm_bytes_per_s", "launch_floor_s", "queue")
    # The figures are the SOL basis of every stored result: they change only through
    # `manage.py hardware_profile` (a new version, results rescaled, boards rescored, audited).
    readonly_fields = ("name", "version", "arch", "peak_flops", "hbm_bytes_per_s",
                       "launch_floor_s", "source")
    inlines = [HardwareProfileVersionInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class OperatorInline(admin.TabularInline[Operator, Release]):
    model = Operator
    fields = ("name",)
    extra = 0
    show_change_link = True


@admin.register(Release)
class ReleaseAdmin(admin.ModelAdmin[Release]):
    list_display = ("name", "version", "dsl", "dsl_ratio_threshold", "hidden_shape_budget_s",
                    "hidden_release_quantum_s", "imported_at")
    # The fallback policy changes scores: it is set on the release's weights page, which
    # rescores every submission (and writes the audit log); not editable here.
    readonly_fields = ("content_sha256", "imported_at", "fallback_scores_zero")
    inlines = [OperatorInline]


@admin.register(ReleaseHidden)
class ReleaseHiddenAdmin(admin.ModelAdmin[ReleaseHidden]):
    list_display = ("release",)


@admin.register(Operator)
class OperatorAdmin(admin.ModelAdmin[Operator]):
    list_display = ("name", "release")
    list_filter = ("release",)


@admin.register(OperatorHidden)
class OperatorHiddenAdmin(admin.ModelAdmin[OperatorHidden]):
    list_display = ("operator", "atol", "rtol")


@admin.register(Shape)
class ShapeAdmin(admin.ModelAdmin[Shape]):
    list_display = ("shape_id", "operator", "position")
    list_filter = ("operator__release", "operator__name")
