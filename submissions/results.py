"""One shape's report of a GPU host, stored with its SOL and attainment (computed here,
where the hidden roofline lives). Which reports count, and what they do to the job, is the
job life cycle's (submissions/jobs.py, `record_event`).

Idempotent per (job, attempt, shape): a redelivered message or a re-run attempt never
duplicates a result.
"""

from __future__ import annotations

from typing import Any

from evaluation.catalog.models import HardwareProfile, Shape
from evaluation.harness.results import ShapeReport, shown_verdict
from evaluation.harness.roofline import roofline_point
from submissions.models import EvaluationJob, ShapeResult
from submissions.sol import shape_scores

# A call's wall time in the harness's timing report (result_schema.json): read here only,
# into ShapeResult.wall_time_s; the API keeps it as that field's public name (submissions/api.py)
# and the profile's notes name it so.
WALL_TIME_KEY = "wall_median_s"


def store_shape(job: EvaluationJob, raw: dict[str, Any]) -> None:
    """Store (or replace) one shape's result of the job's current attempt."""
    operator = job.candidate.operator
    report = ShapeReport.from_dict(raw)
    shape = Shape.every_tier.filter(operator=operator, shape_id=report.shape_id).first()
    if shape is None or (shape.hidden and shape.shape_id not in job.hidden_shape_ids):
        return  # a shape this job does not cover: ignore rather than trust it
    timing = report.timing or {}
    adoption = report.adoption or {}
    roofline = _roofline(job, shape.shape_id, report.status, timing)
    ShapeResult.every_tier.update_or_create(
        job=job, attempt=job.attempts, shape=shape,
        defaults={
            "status": report.status,
            "stage_reached": report.stage_reached or "",
            "failed_stage": report.failed_stage or "",
            "error": report.error or "",
            "max_abs_error": report.max_abs_error,
            "max_rel_error": report.max_rel_error,
            # the raw record stays in `raw`; a CPU run's "native" is stored as unverified
            "verdict": shown_verdict(adoption.get("verdict", ""), job.mode),
            "dsl_ratio": adoption.get("dsl_ratio"),
            "median_s": timing.get("median_s"),
            "median_se_s": timing.get("median_se_s"),
            "p10_s": timing.get("p10_s"),
            "p90_s": timing.get("p90_s"),
            "samples": timing.get("n"),
            "launch_method": timing.get("method") or "",
            "wall_time_s": wall_time(timing),
            "sol_s": roofline.get("sol_s"),
            "attainment": roofline.get("attainment"),
            "attainment_with_floor": roofline.get("attainment_with_floor"),
            "suspicious": bool(roofline.get("suspicious", False)),
            "raw": raw,
        })


def wall_time(timing: dict[str, Any]) -> float | None:
    """The end-to-end wall time of one call (`ShapeResult.wall_time_s`), read from the
    harness's timing report: the one place the web tier reads its wire key (the API gives it
    under the same name, submissions/api.py). Results of schema /1 (before 2026-12-02) had
    CUDA events under the profiler instead: close to it under graph replay (one launch),
    longer for eager forwards (the profiler stretched their host gaps)."""
    value = timing.get(WALL_TIME_KEY, timing.get("event_median_s"))
    return float(value) if isinstance(value, int | float) else None


def _roofline(job: EvaluationJob, shape_id: str, status: str,
              timing: dict[str, Any]) -> dict[str, Any]:
    shape = job.candidate.operator.hidden.shape_roofline(shape_id)
    # The profile's current figures, read under a lock: an admin's update of the profile
    # (leaderboard/hardware.py) rescales every stored result, and waits for this one.
    hardware = (HardwareProfile.objects.select_for_update(no_key=True)
                .get(pk=job.candidate.submission.hardware_id))
    sol_s = roofline_point(shape, hardware.as_spec()).sol_s if shape is not None else None
    return shape_scores(sol_s, str(status), timing.get("median_s"),
                        timing.get("measured", False), hardware.launch_floor_s)
