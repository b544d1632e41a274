"""Reads of submissions, shaped by who asks: a team sees its own, admins see all."""

from __future__ import annotations

from typing import Any

from django.db.models import F, QuerySet
from django.http import Http404

from portal.accounts.auth import is_admin, request_team
from portal.audit.models import AuditEntry
from submissions.models import EvaluationJob, ShapeResult, Submission

PUBLIC_RESULT_FIELDS = ("status", "stage_reached", "failed_stage", "error", "max_abs_error",
                        "max_rel_error", "verdict", "dsl_ratio", "median_s", "p10_s", "p90_s",
                        "samples", "launch_method", "event_median_s", "attainment",
                        "attainment_with_floor", "suspicious")
ADMIN_RESULT_FIELDS = ("sol_s",)  # derived from the hidden roofline


def submissions_visible(request: Any) -> QuerySet[Submission]:
    base = Submission.objects.select_related("team", "release", "hardware")
    if is_admin(request):
        return base
    team = request_team(request)
    return base.filter(team=team) if team is not None else base.none()


def submission_visible(request: Any, pk: int) -> Submission:
    submission = submissions_visible(request).filter(pk=pk).first()
    if submission is None:
        raise Http404("no such submission")  # the same answer whether it exists or not
    return submission


def submission_detail(request: Any, submission: Submission) -> dict[str, Any]:
    admin = is_admin(request)
    jobs = list(EvaluationJob.objects.filter(candidate__submission=submission)
                .select_related("candidate__operator").order_by("candidate__operator__name"))
    # Every job's latest-attempt results in one query of plain rows (a submission can hold
    # hundreds), not one query of model instances per job.
    fields = PUBLIC_RESULT_FIELDS + (ADMIN_RESULT_FIELDS if admin else ())
    results: dict[int, list[dict[str, Any]]] = {job.pk: [] for job in jobs}
    for row in (ShapeResult.objects
                .filter(job__candidate__submission=submission, attempt=F("job__attempts"))
                .order_by("shape__position").values_list("job_id", "shape__shape_id", *fields)):
        results[row[0]].append({"shape_id": row[1], **dict(zip(fields, row[2:], strict=True))})
    return {
        "id": submission.pk, "team": submission.team.name,
        "release": {"id": submission.release_id, "name": submission.release.name,
                    "version": submission.release.version},
        "hardware": submission.hardware.name, "agent": submission.agent,
        "model": submission.model_name, "output_tokens": submission.output_tokens,
        "notes": submission.notes, "created_at": submission.created_at.isoformat(),
        "status": submission_status(jobs),
        "jobs": [job_detail(job, results[job.pk]) for job in jobs],
    }


def submission_status(jobs: Any) -> str:
    statuses = {job.status for job in jobs}
    for status in ("running", "queued"):
        if status in statuses:
            return status
    return "failed" if statuses == {"failed"} else ("scored" if "scored" in statuses else
                                                    next(iter(statuses), "empty"))


def job_detail(job: EvaluationJob, results: list[dict[str, Any]]) -> dict[str, Any]:
    """A job and its results (those of its latest attempt, in shape order)."""
    return {
        "id": job.pk, "operator": job.candidate.operator.name, "status": job.status,
        "attempts": job.attempts, "shapes_done": job.shapes_done, "shapes_total": job.shapes_total,
        "error": job.error, "source": job.candidate.source, "sha256": job.candidate.sha256,
        "heartbeat_at": job.heartbeat_at.isoformat() if job.heartbeat_at else None,
        "results": results,
    }


def quarantined_results(*, include_reviewed: bool = False) -> list[dict[str, Any]]:
    """Suspicious shape results with the evidence an admin needs to judge them.

    Reviewed results are found through the audit log's "result.accept"/"result.reject"
    entries, so the page can show what was decided, by whom and when.
    """
    results = (ShapeResult.objects.filter(suspicious=True)
               .select_related("shape__operator__release", "job__candidate__submission__team",
                               "job__candidate__submission__hardware")
               .order_by("-pk"))
    rows = [_evidence(r) for r in results]
    if include_reviewed:
        reviewed = {int(e.target.split(":")[1]): e for e in
                    AuditEntry.objects.filter(action__in=("result.accept", "result.reject"))
                    .select_related("actor")}
        for result in ShapeResult.objects.filter(pk__in=list(reviewed)).select_related(
                "shape__operator__release", "job__candidate__submission__team",
                "job__candidate__submission__hardware"):
            entry = reviewed[result.pk]
            rows.append({**_evidence(result), "decision": entry.action.split(".")[1],
                         "decided_by": str(entry.actor or "–"), "decided_at": entry.at})
    return rows


def _evidence(result: ShapeResult) -> dict[str, Any]:
    raw = result.raw or {}
    adoption = raw.get("adoption") or {}
    timing = raw.get("timing") or {}
    submission = result.job.candidate.submission
    checks = []
    if result.attainment is not None and result.attainment > 1:
        checks.append(f"attainment {result.attainment:.2f} > 1: faster than the hardware's "
                      "speed of light")
    if timing.get("event_median_s") and result.median_s and \
            abs(timing["event_median_s"] - result.median_s) > 0.5 * result.median_s:
        checks.append("CUDA-event time and profiler device time disagree by more than 50%")
    checks += [str(n) for n in adoption.get("notes") or []]
    return {
        "pk": result.pk, "submission": submission.pk, "team": submission.team.name,
        "release": str(result.shape.operator.release), "hardware": submission.hardware.name,
        "operator": result.shape.operator.name, "shape": result.shape.shape_id,
        "median_us": result.median_s * 1e6 if result.median_s else None,
        "sol_us": result.sol_s * 1e6 if result.sol_s else None,
        "attainment": result.attainment, "samples": result.samples,
        "method": result.launch_method, "verdict": result.verdict,
        "dsl_ratio": result.dsl_ratio,
        "dsl_kernels": list(adoption.get("dsl_kernels") or []),
        "foreign_kernels": [f"{k.get('name')} ({k.get('category')})"
                            for k in adoption.get("foreign_kernels") or []],
        "checks": checks, "decision": None,
    }
