from django.contrib import admin

from .models import SubmissionScore, WeightSet


@admin.register(WeightSet)
class WeightSetAdmin(admin.ModelAdmin[WeightSet]):
    list_display = ("release", "version", "source", "author", "active", "created_at")
    list_filter = ("release", "active", "source")
    readonly_fields = ("release", "version", "weights", "source", "author", "active", "created_at")


@admin.register(SubmissionScore)
class SubmissionScoreAdmin(admin.ModelAdmin[SubmissionScore]):
    list_display = ("submission", "weight_set", "ranked", "aggregate", "correctness_rate",
                    "dsl_adoption_rate")
    list_filter = ("weight_set", "ranked")
