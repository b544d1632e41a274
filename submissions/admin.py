from django.contrib import admin

from .models import Candidate, EvaluationJob, ShapeResult, Submission


class CandidateInline(admin.TabularInline):
    model = Candidate
    fields = ("operator", "sha256")
    readonly_fields = ("operator", "sha256")
    extra = 0
    show_change_link = True


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ("id", "team", "release", "hardware", "agent", "model_name", "created_at")
    list_filter = ("release", "hardware", "team")
    inlines = [CandidateInline]


@admin.register(Candidate)
class CandidateAdmin(admin.ModelAdmin):
    list_display = ("id", "submission", "operator", "sha256")


@admin.register(EvaluationJob)
class EvaluationJobAdmin(admin.ModelAdmin):
    list_display = ("id", "candidate", "status", "attempts", "shapes_done", "shapes_total",
                    "heartbeat_at")
    list_filter = ("status",)


@admin.register(ShapeResult)
class ShapeResultAdmin(admin.ModelAdmin):
    list_display = ("job", "attempt", "shape", "status", "verdict", "median_s", "attainment",
                    "suspicious")
    list_filter = ("status", "verdict", "suspicious")
