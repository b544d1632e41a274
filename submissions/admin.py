from typing import Any

from django.contrib import admin

from .jobs import job_rerun
from .models import Candidate, EvaluationJob, ShapeResult, Submission
from .services import shape_result_review


@admin.action(description="Re-run the evaluation (new attempt, no quota)")
def rerun_submissions(modeladmin: Any, request: Any, queryset: Any) -> None:
    for job in EvaluationJob.objects.filter(candidate__submission__in=queryset):
        job_rerun(job=job, actor=request.user)


@admin.action(description="Re-run (new attempt, no quota)")
def rerun_jobs(modeladmin: Any, request: Any, queryset: Any) -> None:
    for job in queryset:
        job_rerun(job=job, actor=request.user)


@admin.action(description="Accept the suspicious result as measured")
def accept_results(modeladmin: Any, request: Any, queryset: Any) -> None:
    for result in queryset.filter(suspicious=True).select_related("job__candidate"):
        shape_result_review(result=result, accept=True, actor=request.user)


@admin.action(description="Reject the suspicious result (scores 0)")
def reject_results(modeladmin: Any, request: Any, queryset: Any) -> None:
    for result in queryset.filter(suspicious=True).select_related("job__candidate"):
        shape_result_review(result=result, accept=False, actor=request.user)


class CandidateInline(admin.TabularInline[Candidate, Submission]):
    model = Candidate
    fields = ("operator", "sha256")
    readonly_fields = ("operator", "sha256")
    extra = 0
    show_change_link = True


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin[Submission]):
    list_display = ("id", "team", "release", "hardware", "mode", "baseline", "agent",
                    "model_name", "created_at")
    # Filter by release and hardware, select all, "Re-run": every submission of a board again.
    list_filter = ("release", "hardware", "mode", "baseline", "team")
    inlines = [CandidateInline]
    actions = [rerun_submissions]


@admin.register(Candidate)
class CandidateAdmin(admin.ModelAdmin[Candidate]):
    list_display = ("id", "submission", "operator", "sha256")


@admin.register(EvaluationJob)
class EvaluationJobAdmin(admin.ModelAdmin[EvaluationJob]):
    list_display = ("id", "candidate", "status", "attempts", "shapes_done", "shapes_total",
                    "heartbeat_at")
    list_filter = ("status",)
    actions = [rerun_jobs]


@admin.register(ShapeResult)
class ShapeResultAdmin(admin.ModelAdmin[ShapeResult]):
    list_display = ("job", "attempt", "shape", "status", "verdict", "median_s", "attainment",
                    "suspicious")
    list_filter = ("status", "verdict", "suspicious")
    actions = [accept_results, reject_results]
    readonly_fields = ("raw",)
