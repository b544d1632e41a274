"""`atrex loop` accepts a revision only when it is correct, native and better than the best
beyond both intervals (timed results: a GPU portal's; the CPU portal's loop test shows the
untimed cases end to end)."""

from __future__ import annotations

from typing import Any

from atrex_cli.loop import Best, audit_summary, decide


def result(s_op: float | None, interval: list[float] | None, *, verdict: str = "native",
           status: str = "passed", settled: bool = True) -> dict[str, Any]:
    shape = {"shape_id": "s1", "status": status, "failed_stage": None if status == "passed"
             else "correctness", "error": None if status == "passed" else "max abs error 3",
             "verdict": verdict, "native": verdict in ("native", "unverified-cpu")}
    correct = status == "passed"
    return {"settled": settled, "summary": "scored", "operators": [{
        "operator": "rms_norm", "shapes": [shape], "correct": int(correct),
        "native": int(correct and shape["native"]), "s_op": s_op, "s_op_interval": interval}]}


BEST = Best(round=1, submission=10, sha256="a" * 64, s_op=0.40, interval=[0.38, 0.42],
            path="best.py")


def test_a_revision_better_beyond_both_intervals_is_accepted() -> None:
    decision = decide(result(0.50, [0.47, 0.53]), "rms_norm", BEST)
    assert decision.accepted and decision.reason.startswith("better beyond the interval")


def test_a_revision_better_within_the_intervals_is_rejected() -> None:
    decision = decide(result(0.43, [0.41, 0.45]), "rms_norm", BEST)
    assert not decision.accepted
    assert decision.reason.startswith("better but within the interval: S_op 0.4300")


def test_a_slower_wrong_or_fallback_revision_is_rejected_with_its_reason() -> None:
    assert decide(result(0.30, [0.29, 0.31]), "rms_norm", BEST).reason.startswith("not better")
    wrong = decide(result(0.0, None, status="failed"), "rms_norm", BEST)
    assert not wrong.accepted and wrong.reason.startswith("incorrect: 1 of 1 shapes failed")
    fallback = decide(result(0.9, [0.88, 0.92], verdict="fallback-vendor"), "rms_norm", BEST)
    assert not fallback.accepted and "fallback-vendor" in fallback.reason
    late = decide(result(None, None, settled=False), "rms_norm", BEST)
    assert not late.accepted and "wait-timeout" in late.reason


def test_without_an_interval_the_score_itself_must_clear_the_bests_high_end() -> None:
    assert not decide(result(0.41, None), "rms_norm", BEST).accepted
    assert decide(result(0.43, None), "rms_norm", BEST).accepted
    assert decide(result(0.1, None), "rms_norm", None).accepted  # the first correct one


def test_the_summary_a_restarted_generator_gets_names_the_best_and_the_rejections() -> None:
    trail = [{"round": 1, "decision": "accepted", "reason": "the first", "submission": 10,
              "s_op": 0.4, "interval": [0.38, 0.42]},
             {"round": 2, "decision": "rejected", "reason": "not native: 1 of 1 shapes"},
             {"round": 3, "decision": "rejected", "reason": "incorrect: 1 of 1 shapes failed"}]
    text = audit_summary(trail, BEST)
    assert text.startswith("3 rounds so far: 1 accepted, 2 rejected (1 incorrect, 1 not native)")
    assert "best: round 1, submission 10, S_op 0.4000 [0.3800, 0.4200]" in text
