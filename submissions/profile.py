"""Profile feedback on a team's own submission: per shape, what ran and how close it came.

For each shape of the latest attempt: the kernels of one observed forward (the adoption
stage's profiler records: name, category, launches, device time and share of the forward's
device time), the DSL ratio, the timed forward (median, p10/p90, kernels per forward), the
attainment with and without the launch floor, and the achieved fraction of peak bandwidth or
FLOP rate.

Nothing hidden is revealed beyond what the team's own results already show. The achieved
rate is read from the attainment the team already sees: a = SOL / T, and SOL is the time of
the shape's bounding resource at its peak, so the bounding resource ran at a x its peak
(memory-bound: bytes at a x B_hbm; compute-bound: FLOPs at a x the peak of the precision
path that takes longest). No W or Q is used or returned; the regime is the side of the
ridge the submission's roofline chart already draws. The other resource's rate would need
W or Q themselves and is not given.
"""

from __future__ import annotations

from typing import Any

from django.db.models import F

from evaluation.catalog.models import HardwareProfile
from evaluation.harness.release import ShapeRoofline
from evaluation.harness.roofline import BALANCED, COMPUTE, MEMORY, dominant_peak_path, roofline_point
from submissions.models import EvaluationJob, ShapeResult, Submission
from submissions.results import WALL_TIME_KEY

PROFILE_SCHEMA = "atrex.submission-profile/1"
_FIELDS = ("status", "failed_stage", "verdict", "dsl_ratio", "median_s", "p10_s", "p90_s",
           "samples", "launch_method", "wall_time_s", "attainment", "attainment_with_floor",
           "suspicious")
NOTES = (
    "kernels: one forward observed under the profiler in the adoption stage (L2 not flushed, "
    "one call), so their times need not add up to the timed median; share = the kernel's "
    "device time / all device time of that forward",
    "achieved: attainment x the peak of the resource that bounds the shape (its regime); "
    "the other resource's rate is not given (it would reveal the hidden work W or traffic Q)",
    "attainment_with_floor: (SOL + the hardware's launch floor) / median time, capped at 1",
    "median_s: the scored time, the device span of one forward (first device activity's start "
    f"to the last one's end, any stream, L2 flushed); {WALL_TIME_KEY}: the end-to-end time of one "
    "call (CUDA events around it, no profiler), what the host adds; busy_median_s: the union "
    "of the kernels' intervals, never scored",
    "environment: the GPU, driver, CUDA, torch and DSL versions the shape was evaluated with, "
    "and the SM and memory clocks (MHz) before and after its timing stage",
)


def submission_profile(submission: Submission) -> dict[str, Any]:
    """The profile of every shape of `submission`'s latest attempts, per operator (a team's
    own submission or an admin's view: callers check visibility)."""
    hardware = submission.hardware
    jobs = list(EvaluationJob.objects.filter(candidate__submission=submission)
                .select_related("candidate__operator__hidden")
                .order_by("candidate__operator__name"))
    rows: dict[int, list[dict[str, Any]]] = {job.pk: [] for job in jobs}
    for job_id, shape_id, adoption, timing, environment, *values in (
            ShapeResult.objects.filter(job__in=jobs, attempt=F("job__attempts"))
            .order_by("shape__position")
            .values_list("job_id", "shape__shape_id", "raw__adoption", "raw__timing",
                         "raw__environment", *_FIELDS)):
        rows[job_id].append({"shape_id": shape_id, **dict(zip(_FIELDS, values, strict=True)),
                             "_adoption": adoption, "_timing": timing,
                             "_environment": environment})
    return {
        "schema": PROFILE_SCHEMA, "submission": submission.pk, "mode": submission.mode,
        "hardware": {"name": hardware.name, "hbm_bytes_per_s": hardware.hbm_bytes_per_s,
                     "peak_flops": dict(hardware.peak_flops),
                     "launch_floor_s": hardware.launch_floor_s},
        "notes": list(NOTES),
        "operators": [{"operator": job.candidate.operator.name, "job_status": job.status,
                       "job_mode": job.mode,
                       "shapes": [shape_profile(row, _roofline(job, row["shape_id"]), hardware)
                                  for row in rows[job.pk]]}
                      for job in jobs],
    }


def _roofline(job: EvaluationJob, shape_id: str) -> ShapeRoofline | None:
    hidden = getattr(job.candidate.operator, "hidden", None)
    return hidden.shape_roofline(shape_id) if hidden is not None else None


def shape_profile(row: dict[str, Any], roofline: ShapeRoofline | None,
                  hardware: HardwareProfile) -> dict[str, Any]:
    """One shape's profile from its stored result (`row`: the result's fields, its raw
    adoption and timing reports) and its hidden roofline, which only decides the bound."""
    adoption = row["_adoption"] if isinstance(row["_adoption"], dict) else {}
    timing = row["_timing"] if isinstance(row["_timing"], dict) else {}
    kernels, total_s = kernels_of(adoption)
    return {
        **{key: value for key, value in row.items() if not key.startswith("_")},
        "kernels_per_forward": timing.get("kernels_per_forward"),
        # "span": the device span of one forward in either launch mode. Results from before
        # 2026-12-02 may say "busy" (eager forwards were scored by the kernels' busy time
        # then) or nothing (before it was reported).
        "scored_as": timing.get("scored_as"),
        "span_measured_by": timing.get("span_measured_by"),
        "busy_median_s": timing.get("busy_median_s"),
        "environment": row["_environment"] if isinstance(row["_environment"], dict) else None,
        "kernels": kernels,
        "kernel_time_s": total_s,
        **achieved(row, roofline, hardware),
    }


def kernels_of(adoption: dict[str, Any]) -> tuple[list[dict[str, Any]], float | None]:
    """The observed forward's kernels, longest first, and its total device time (None when
    there are no device times: Triton's interpreter names the DSL kernels and the aten
    compute ops only).

    Results from before the harness listed every kernel (`kernels`) have the foreign
    kernels' times and the DSL kernels' total: the DSL kernels are then one row.
    """
    timed = adoption.get("method") == "device-time"
    by_category = adoption.get("time_by_category") or {}
    total = sum(float(v) for v in by_category.values()) if timed else None
    listed = adoption.get("kernels")
    rows: list[dict[str, Any]]
    if isinstance(listed, list) and listed:
        rows = [_kernel_row(k) for k in listed if isinstance(k, dict)]
    else:
        own = [str(name) for name in adoption.get("dsl_kernels") or []]
        rows = [_kernel_row(k) for k in adoption.get("foreign_kernels") or []
                if isinstance(k, dict)]
        if own:
            own_s = float(by_category.get("dsl", 0.0)) if timed else None
            rows.append({"name": ", ".join(own), "category": "dsl", "launches": None,
                         "device_time_s": own_s, "dsl": None})
        rows.sort(key=lambda r: -(r["device_time_s"] or 0.0))
    for row in rows:
        row["share"] = (row["device_time_s"] / total
                        if total and row["device_time_s"] is not None else None)
    return rows, total


def _kernel_row(kernel: dict[str, Any]) -> dict[str, Any]:
    time_us = kernel.get("device_time_us")
    return {"name": str(kernel.get("name", "")), "category": str(kernel.get("category", "")),
            "launches": int(kernel["count"]) if isinstance(kernel.get("count"), int) else None,
            "device_time_s": float(time_us) * 1e-6 if isinstance(time_us, int | float) else None,
            "dsl": str(kernel["dsl"]) if kernel.get("dsl") else None}


def achieved(row: dict[str, Any], roofline: ShapeRoofline | None,
             hardware: HardwareProfile) -> dict[str, Any]:
    """The bounding resource and its achieved fraction of peak, from the attainment alone
    (None without a measured, correct time)."""
    values: dict[str, Any] = {"bound": None, "bandwidth_fraction": None,
                              "bandwidth_bytes_per_s": None, "flop_rate_fraction": None,
                              "flop_rate_per_s": None, "peak_path": None}
    if roofline is None:
        return values
    spec = hardware.as_spec()
    values["bound"] = roofline_point(roofline, spec).regime
    a = row.get("attainment")
    if row.get("status") != "passed" or a is None or not row.get("median_s"):
        return values
    if values["bound"] in (MEMORY, BALANCED):
        values.update(bandwidth_fraction=a, bandwidth_bytes_per_s=a * hardware.hbm_bytes_per_s)
    path = dominant_peak_path(roofline, spec)
    if values["bound"] in (COMPUTE, BALANCED) and path is not None:
        values.update(flop_rate_fraction=a, flop_rate_per_s=a * hardware.peak_flops[path],
                      peak_path=path)
    return values
