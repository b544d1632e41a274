"""A submission's result as an agent reads it: one compact JSON document per submission.

`atrex loop` hands it to the generator each round, the MCP server's `get_result` and
`wait_for_result` tools answer it. Built from two API answers, the submission
(`GET /api/submissions/ID/`) and its profile (`GET /api/submissions/ID/profile/`), with
nothing left out that a revision needs: per shape its status and error, verdict and the
foreign kernels behind a fallback, time, attainment, the regime, and the kernels that took
the time.
"""

from __future__ import annotations

from typing import Any

FEEDBACK_SCHEMA = "atrex.feedback/1"
KERNELS_PER_SHAPE = 6  # the largest by device time: what a revision should look at


def feedback(detail: dict[str, Any], profile: dict[str, Any] | None) -> dict[str, Any]:
    """The agent's view of one submission (see the module docstring)."""
    score = detail.get("score") or {}
    intervals = score.get("intervals") or {}
    profiled = _profiled_shapes(profile)
    operators = []
    for job in detail["jobs"]:
        name = job["operator"]
        shapes = [_shape(r, profiled.get((name, r["shape_id"]), {})) for r in job["results"]]
        operators.append({
            "operator": name, "status": job["status"], "mode": job.get("mode", ""),
            "dsl": job.get("dsl", ""), "error": job.get("error", ""),
            "shapes_done": job["shapes_done"], "shapes_total": job["shapes_total"],
            "s_op": (score.get("by_operator") or {}).get(name),
            "s_op_interval": (intervals.get("by_operator") or {}).get(name),
            "correct": sum(s["status"] == "passed" for s in shapes),
            "native": sum(s["status"] == "passed" and s["native"] for s in shapes),
            "hidden_shapes": job.get("hidden_shapes"),
            "shapes": shapes,
        })
    outcome = detail.get("outcome") or {}
    return {
        "schema": FEEDBACK_SCHEMA, "submission": detail["id"], "mode": detail.get("mode"),
        "release": detail["release"], "hardware": detail["hardware"],
        "status": outcome.get("status", detail["status"]), "summary": outcome.get("summary"),
        "settled": settled(detail), "interpreter": bool(outcome.get("interpreter")),
        "all_correct_and_native": all_correct_and_native(detail),
        "score": {"weights_version": score.get("weights_version"),
                  "aggregate": score.get("aggregate"),
                  "aggregate_interval": intervals.get("aggregate"),
                  "by_operator": score.get("by_operator") or {},
                  "ranked": score.get("ranked"), "current": score.get("current")}
        if score else None,
        "notes": (profile or {}).get("notes") or [],
        "operators": operators,
    }


def settled(detail: dict[str, Any]) -> bool:
    """No job is queued or running, and the score covers every scored job (or none will
    come)."""
    if any(job["status"] in ("queued", "running") for job in detail["jobs"]):
        return False
    if not any(job["status"] == "scored" for job in detail["jobs"]):
        return True
    score = detail.get("score")
    return score is None or bool(score.get("current"))


def all_correct_and_native(detail: dict[str, Any]) -> bool:
    """Every shape evaluated, correct and run by the candidate's own DSL kernels (in the
    interpreter: no foreign work seen, its `unverified-cpu`)."""
    outcome = detail.get("outcome") or {}
    shapes = outcome.get("shapes") or 0
    return bool(shapes) and outcome.get("correct") == shapes == outcome.get("native")


def _shape(result: dict[str, Any], profiled: dict[str, Any]) -> dict[str, Any]:
    kernels = sorted(profiled.get("kernels") or [],
                     key=lambda k: -(k.get("device_time_s") or 0.0))
    return {
        "shape_id": result["shape_id"], "status": result["status"],
        "failed_stage": result.get("failed_stage") or None,
        "error": result.get("error") or None,
        "max_abs_error": result.get("max_abs_error"),
        "max_rel_error": result.get("max_rel_error"),
        "verdict": result.get("verdict") or None,
        "native": result.get("verdict") in ("native", "unverified-cpu"),
        "dsl_ratio": result.get("dsl_ratio"),
        "foreign_kernels": result.get("foreign_kernels") or [],
        "aten_compute_ops": result.get("aten_compute_ops") or {},
        "median_s": result.get("median_s"), "p10_s": result.get("p10_s"),
        "p90_s": result.get("p90_s"), "launch_method": result.get("launch_method") or None,
        "attainment": result.get("attainment"),
        "attainment_with_floor": result.get("attainment_with_floor"),
        "suspicious": bool(result.get("suspicious")),
        "regime": profiled.get("bound"),
        "bandwidth_fraction": profiled.get("bandwidth_fraction"),
        "kernels": [{"name": k.get("name"), "category": k.get("category"),
                     "device_time_s": k.get("device_time_s"), "share": k.get("share"),
                     "launches": k.get("launches")} for k in kernels[:KERNELS_PER_SHAPE]],
    }


def _profiled_shapes(profile: dict[str, Any] | None) -> dict[tuple[str, str], dict[str, Any]]:
    if not profile:
        return {}
    return {(op["operator"], s["shape_id"]): s for op in profile.get("operators") or []
            for s in op.get("shapes") or []}
