from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest

from .jobs import job_rerun
from .models import Candidate, EvaluationJob, NcuProfile, ShapeResult, Submission
from .services import shape_result_review, submission_set_ranking_excluded

# A job re-run this recently and not yet started is not re-run again: a double click, or a
# second admin, would otherwise throw away the attempt the first one queued.
RERUN_GUARD = timedelta(minutes=10)


def _rerun(modeladmin: Any, request: Any, jobs: Any) -> None:
    """Re-run `jobs` and say what happened: how many were queued again, and which were left
    alone because a re-run of theirs still waits for a worker."""
    queued: list[int] = []
    waiting: list[int] = []
    for job in jobs:
        rerun = job_rerun(job=job, actor=request.user, unless_rerun_within=RERUN_GUARD)
        (queued if rerun else waiting).append(job.pk)
    if queued:
        modeladmin.message_user(request, (
            f"Re-run queued for {len(queued)} job{'s' if len(queued) != 1 else ''} "
            f"(jobs {', '.join(map(str, queued[:20]))}{' …' if len(queued) > 20 else ''}): "
            "new attempts on the low-priority queue, after the teams' jobs; the boards leave "
            "those submissions out until they end."), messages.SUCCESS)
    if waiting:
        modeladmin.message_user(request, (
            f"{len(waiting)} job{'s' if len(waiting) != 1 else ''} "
            f"({', '.join(map(str, waiting[:20]))}) re-run in the last "
            f"{int(RERUN_GUARD.total_seconds() // 60)} minutes and still queued: left as they "
            "are, not re-run twice."),
            messages.WARNING)
    if not queued and not waiting:
        modeladmin.message_user(request, "No job to re-run: the submissions have no operator.",
                                messages.WARNING)


@admin.action(description="Re-run the evaluation (new attempt, no quota)")
def rerun_submissions(modeladmin: Any, request: Any, queryset: Any) -> None:
    _rerun(modeladmin, request,
           EvaluationJob.objects.filter(candidate__submission__in=queryset).order_by("pk"))


@admin.action(description="Re-run (new attempt, no quota)")
def rerun_jobs(modeladmin: Any, request: Any, queryset: Any) -> None:
    _rerun(modeladmin, request, queryset.order_by("pk"))


@admin.action(description="Accept the suspicious result as measured")
def accept_results(modeladmin: Any, request: Any, queryset: Any) -> None:
    for result in queryset.filter(suspicious=True).select_related("job__candidate"):
        shape_result_review(result=result, accept=True, actor=request.user)


@admin.action(description="Reject the suspicious result (scores 0)")
def reject_results(modeladmin: Any, request: Any, queryset: Any) -> None:
    for result in queryset.filter(suspicious=True).select_related("job__candidate"):
        shape_result_review(result=result, accept=False, actor=request.user)


@admin.action(description="Exclude from ranking: does not generalise to the hidden shapes")
def exclude_from_ranking(modeladmin: Any, request: Any, queryset: Any) -> None:
    for submission in queryset:
        submission_set_ranking_excluded(
            submission=submission, excluded=True, actor=request.user,
            reason="does not generalise to the release's hidden shapes")


@admin.action(description="Rank again (undo an exclusion)")
def include_in_ranking(modeladmin: Any, request: Any, queryset: Any) -> None:
    for submission in queryset.filter(ranking_excluded=True):
        submission_set_ranking_excluded(submission=submission, excluded=False, reason="",
                                        actor=request.user)


class CandidateInline(admin.TabularInline[Candidate, Submission]):
    model = Candidate
    fields = ("operator", "sha256")
    readonly_fields = ("operator", "sha256")
    extra = 0
    show_change_link = True


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin[Submission]):
    list_display = ("id", "team", "release", "hardware", "mode", "jobs_status", "baseline",
                    "ranking_excluded", "agent", "model_name", "created_at")
    # Filter by release and hardware, select all, "Re-run": every submission of a board again.
    list_filter = ("release", "hardware", "mode", "baseline", "team")
    inlines = [CandidateInline]
    actions = [rerun_submissions, exclude_from_ranking, include_in_ranking]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Submission]:
        # the jobs' statuses counted in the list's one query, not one query per row
        counts = {f"jobs_{status}": Count("candidates__job", filter=Q(
            candidates__job__status=status)) for status in EvaluationJob.Status.values}
        return super().get_queryset(request).annotate(**counts)

    @admin.display(description="Jobs")
    def jobs_status(self, submission: Submission) -> str:
        """Its jobs by status, the ones still going first: "1 running, 2 scored"."""
        parts = [f"{getattr(submission, f'jobs_{status}', 0)} {status}"
                 for status in EvaluationJob.Status.values
                 if getattr(submission, f"jobs_{status}", 0)]
        return ", ".join(parts) or "no operator"


@admin.register(Candidate)
class CandidateAdmin(admin.ModelAdmin[Candidate]):
    list_display = ("id", "submission", "operator", "sha256")


@admin.register(EvaluationJob)
class EvaluationJobAdmin(admin.ModelAdmin[EvaluationJob]):
    list_display = ("id", "candidate", "status", "attempts", "shapes_done", "shapes_total",
                    "heartbeat_at", "release_at")
    list_filter = ("status",)
    actions = [rerun_jobs]
    # The hidden tier's hold (submissions/jobs.py): the life cycle's to write, yours to read.
    readonly_fields = ("hidden_started_at", "release_at", "worker_ended_at", "held")


@admin.register(ShapeResult)
class ShapeResultAdmin(admin.ModelAdmin[ShapeResult]):
    list_display = ("job", "attempt", "shape", "hidden", "status", "verdict", "median_s",
                    "attainment", "suspicious")
    list_filter = ("status", "verdict", "suspicious")
    actions = [accept_results, reject_results]
    readonly_fields = ("raw",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ShapeResult]:
        return ShapeResult.every_tier.select_related("shape")  # admins see the hidden tier

    @admin.display(description="hidden tier", boolean=True)
    def hidden(self, result: ShapeResult) -> bool:
        return result.shape.hidden


@admin.register(NcuProfile)
class NcuProfileAdmin(admin.ModelAdmin[NcuProfile]):
    list_display = ("id", "candidate", "shape", "status", "worker", "created_at", "finished_at")
    list_filter = ("status",)
    readonly_fields = ("result",)
