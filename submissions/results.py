"""The web-side results consumer: store what GPU hosts report, score it, move jobs on.

Idempotent per (job, attempt, shape): a redelivered message or a re-run attempt never
duplicates a result. Events of an older attempt, or of a job that already ended, are
ignored. SOL and attainment are computed here, where the hidden roofline lives.
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.db import transaction
from django.utils import timezone

from evaluation.harness.roofline import roofline_point
from evaluation.models import HardwareProfile, Shape
from evaluation.protocol import RESULTS_QUEUE, publish_stop, stop_message
from submissions.models import EvaluationJob, ShapeResult
from submissions.sol import shape_scores

RESCORE_TASK = "leaderboard.rescore_submission"  # by name: leaderboard sits above this app

TERMINAL = (EvaluationJob.Status.SCORED, EvaluationJob.Status.FAILED,
            EvaluationJob.Status.CANCELLED)


def record_event(kind: str, payload: dict[str, Any]) -> None:
    """Store one report of a GPU host, if it comes from the run that holds the job.

    A run holds the job's current attempt from its "started" report on (a redelivered
    message starts the same attempt again and takes it over: the run before it is dead or
    superseded, and its partial results are dropped). Reports of any other run, of an older
    attempt or of an ended job are ignored, and a run still alive is told to stop.
    """
    run = str(payload.get("run", ""))
    with transaction.atomic():
        job = (EvaluationJob.objects.select_for_update(of=("self",))
               .select_related("candidate__operator__hidden", "candidate__submission__hardware")
               .filter(pk=payload.get("job_id")).first())
        if job is None:
            return
        if job.status in TERMINAL or payload.get("attempt") != job.attempts:
            if kind not in ("result", "failed"):  # a run still going: no use any more
                _stop_on_commit(job.pk, payload.get("attempt"), run)
            return  # stale, or already ended
        if kind == "started" and job.run != run:
            if job.run:  # a redelivery: start this attempt afresh with the new run
                job.results.filter(attempt=job.attempts).delete()
                job.shapes_done = 0
                _stop_on_commit(job.pk, job.attempts, job.run)  # in case it still runs
            job.run = run
        elif not job.run:
            job.run = run  # its "started" report is still on the way
        elif job.run != run:
            _stop_on_commit(job.pk, job.attempts, run)
            return  # another run holds this attempt
        now = timezone.now()
        job.heartbeat_at = now
        job.worker = str(payload.get("worker", ""))[:200]
        if job.status == EvaluationJob.Status.QUEUED:
            job.status = EvaluationJob.Status.RUNNING
            job.started_at = job.started_at or now
        # "started" says where the worker runs; the final result says it again.
        reported_mode = (payload.get("result") or {}).get("mode") if kind == "result" \
            else payload.get("mode")
        if reported_mode in (EvaluationJob.Mode.GPU, EvaluationJob.Mode.INTERPRETER):
            job.mode = reported_mode
        if kind == "progress":
            _store_shape(job, payload["shape"])
            job.shapes_done = job.results.filter(attempt=job.attempts).count()
        elif kind == "result":
            result = payload["result"]
            for shape in result["shapes"]:
                _store_shape(job, shape)
            job.shapes_done = job.results.filter(attempt=job.attempts).count()
            job.evaluator_version = str(result.get("evaluator_version", ""))[:30]
            job.status = EvaluationJob.Status.SCORED
            job.finished_at = now
            rescore_on_commit(job.candidate.submission_id)
        elif kind == "failed":
            job.status = EvaluationJob.Status.FAILED
            job.error = str(payload.get("reason", "evaluation failed"))
            job.infrastructure_failure = bool(payload.get("infrastructure", False))
            job.finished_at = now
            rescore_on_commit(job.candidate.submission_id)
        job.save()


def _stop_on_commit(job_id: int, attempt: object, run: str) -> None:
    if isinstance(attempt, int):
        message = stop_message(job_id=job_id, up_to_attempt=attempt, run=run)
        transaction.on_commit(lambda: publish_stop(current_app, message), robust=True)


def rescore_on_commit(submission_id: int) -> None:
    """Once this transaction commits, score the submission afresh: after any job of it ended
    or went back to the queue (boards rank whole evaluations only)."""
    # By task name: scores live in the leaderboard app, which sits above this one.
    transaction.on_commit(lambda: current_app.send_task(
        RESCORE_TASK, args=[submission_id], queue=RESULTS_QUEUE))


def _store_shape(job: EvaluationJob, raw: dict[str, Any]) -> None:
    operator = job.candidate.operator
    shape = Shape.objects.filter(operator=operator, shape_id=raw.get("shape_id")).first()
    if shape is None:
        return  # a shape this operator does not have: ignore rather than trust it
    timing = raw.get("timing") or {}
    adoption = raw.get("adoption") or {}
    roofline = _roofline(job, shape.shape_id, raw, timing)
    ShapeResult.objects.update_or_create(
        job=job, attempt=job.attempts, shape=shape,
        defaults={
            "status": raw.get("status", "failed"),
            "stage_reached": raw.get("stage_reached") or "",
            "failed_stage": raw.get("failed_stage") or "",
            "error": raw.get("error") or "",
            "max_abs_error": raw.get("max_abs_error"),
            "max_rel_error": raw.get("max_rel_error"),
            "verdict": adoption.get("verdict", ""),
            "dsl_ratio": adoption.get("dsl_ratio"),
            "median_s": timing.get("median_s"),
            "p10_s": timing.get("p10_s"),
            "p90_s": timing.get("p90_s"),
            "samples": timing.get("n"),
            "launch_method": timing.get("method") or "",
            "event_median_s": timing.get("event_median_s"),
            "sol_s": roofline.get("sol_s"),
            "attainment": roofline.get("attainment"),
            "attainment_with_floor": roofline.get("attainment_with_floor"),
            "suspicious": bool(roofline.get("suspicious", False)),
            "raw": raw,
        })


def _roofline(job: EvaluationJob, shape_id: str, raw: dict[str, Any],
              timing: dict[str, Any]) -> dict[str, Any]:
    shape = job.candidate.operator.hidden.shape_roofline(shape_id)
    # The profile's current figures, read under a lock: an admin's update of the profile
    # (leaderboard/hardware.py) rescales every stored result, and waits for this one.
    hardware = (HardwareProfile.objects.select_for_update(no_key=True)
                .get(pk=job.candidate.submission.hardware_id))
    sol_s = roofline_point(shape, hardware.as_spec()).sol_s if shape is not None else None
    return shape_scores(sol_s, str(raw.get("status")), timing.get("median_s"),
                        timing.get("measured", False), hardware.launch_floor_s)
