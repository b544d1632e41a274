"""Scoring functions on hand-computed cases."""

from __future__ import annotations

import json

import pytest

from leaderboard.scoring import (
    ScoringPolicy,
    ShapeOutcome,
    SubmissionSummary,
    WeightedScore,
    WeightError,
    combine,
    normalise_weights,
    operator_score,
    operators_not_generalising,
    shape_score,
    solve_rate,
    summarise,
    weighted_score,
)


def shape(op: str, a: float | None, *, correct: bool = True, verdict: str = "native",
          regime: str = "memory", phase: str = "decode", suspicious: bool = False,
          sid: str = "s") -> ShapeOutcome:
    return ShapeOutcome(operator=op, shape_id=sid, correct=correct, verdict=verdict,
                        attainment=a, suspicious=suspicious, regime=regime, phase=phase)


def score_submission(outcomes: list[ShapeOutcome], weights: dict[str, float],
                     subset_operators: dict[str, list[str]] | None = None) -> WeightedScore:
    """Scoring from shape outcomes in one step, as the rescore task does it."""
    return combine(summarise(outcomes), weights, subset_operators)


def test_a_failed_shape_scores_zero_whatever_its_time() -> None:
    assert shape_score(shape("op", 0.9, correct=False)) == 0.0


def test_the_fallback_policy_both_ways() -> None:
    fallback = shape("op", 0.8, verdict="fallback-vendor")
    assert shape_score(fallback) == 0.0
    assert shape_score(fallback, ScoringPolicy(fallback_scores_zero=False)) == 0.8
    assert shape_score(shape("op", 0.5, verdict="mixed")) == 0.0


def test_medians_with_odd_and_even_counts() -> None:
    assert operator_score([0.2, 0.9, 0.4]) == 0.4
    assert operator_score([0.2, 0.9, 0.4, 0.6]) == pytest.approx(0.5)  # (0.4 + 0.6) / 2
    assert operator_score([0.0, 0.0, 0.3, 1.0]) == pytest.approx(0.15)
    assert operator_score([0.5, None]) is None  # a shape not measured yet
    assert operator_score([]) is None


def test_weights_are_normalised_over_the_releases_operators() -> None:
    weights = normalise_weights({"a": 3, "b": 1, "gone": 5}, ["a", "b", "c"])
    assert weights == {"a": 0.75, "b": 0.25, "c": 0.0}
    with pytest.raises(WeightError, match="positive"):
        normalise_weights({"a": 0, "b": 0}, ["a", "b"])
    with pytest.raises(WeightError, match="negative weights for b"):
        normalise_weights({"a": 1, "b": -1}, ["a", "b"])


def test_zero_weights_and_missing_operators() -> None:
    weights = {"a": 0.5, "b": 0.5, "c": 0.0}
    # b has no candidate: it counts 0; c weighs nothing, so its missing score does not matter.
    assert weighted_score({"a": 0.8}, weights) == pytest.approx(0.4)
    assert weighted_score({"a": 0.8, "b": None}, weights) is None


def test_regime_compares_the_times_at_peak_with_a_balanced_band() -> None:
    from evaluation.harness.roofline import regime

    assert regime(1.0, 0.5) == "compute" and regime(0.5, 1.0) == "memory"
    assert regime(1.0, 1.04) == "balanced" == regime(1.04, 1.0)  # within 5%: Atrex's class
    assert regime(1.0, 1.06) == "memory" and regime(1.06, 1.0) == "compute"
    assert regime(0.0, 0.0) == "memory"  # no work at all: nothing to compute


def test_a_whole_submission_by_hand() -> None:
    outcomes = [
        # gemm: compute-bound prefill shapes, median of (0.6, 0.8) = 0.7
        shape("gemm", 0.6, regime="compute", phase="prefill", sid="g1"),
        shape("gemm", 0.8, regime="compute", phase="prefill", sid="g2"),
        # norm: one decode shape correct (0.5), one falls back to torch (scores 0): median 0.25
        shape("norm", 0.5, regime="memory", phase="decode", sid="n1"),
        shape("norm", 0.9, verdict="fallback-torch", regime="memory", phase="decode", sid="n2"),
        # attn: no candidate at all
    ]
    weights = {"gemm": 2, "norm": 1, "attn": 1}
    score = score_submission(outcomes, weights)
    assert score.by_operator == {"attn": 0.0, "gemm": pytest.approx(0.7),
                                 "norm": pytest.approx(0.25)}
    assert score.aggregate == pytest.approx(0.5 * 0.7 + 0.25 * 0.25 + 0.25 * 0)  # 0.4125
    assert score.unweighted_mean == pytest.approx((0.7 + 0.25 + 0) / 3)
    # Subsets from the submission's own shapes: compute = gemm only, memory = norm only.
    assert score.compute == pytest.approx(0.7) and score.prefill == pytest.approx(0.7)
    assert score.memory == pytest.approx(0.25) and score.decode == pytest.approx(0.25)
    assert score.correctness_rate == 1.0 and score.dsl_adoption_rate == 0.75
    assert score.ranked


def test_release_subsets_count_an_omitted_operator_as_zero() -> None:
    outcomes = [shape("norm", 0.5, sid="n1")]
    score = score_submission(outcomes, {"norm": 1, "attn": 1},
                             subset_operators={"decode": ["norm", "attn"], "memory": ["norm"]})
    assert score.decode == pytest.approx(0.25)  # attn has decode shapes but no candidate
    assert score.memory == pytest.approx(0.5)
    assert score.compute is None and score.prefill is None


def test_a_suspicious_shape_unranks_the_submission() -> None:
    score = score_submission([shape("a", 1.7, suspicious=True)], {"a": 1})
    assert not score.ranked


def test_solve_rate_across_teams() -> None:
    solved = [shape("a", 0.5), shape("a", 0.6)]
    fallback = [shape("a", 0.5), shape("a", 0.6, verdict="fallback-torch")]
    wrong = [shape("a", None, correct=False)]
    assert solve_rate([solved, fallback, wrong, []]) == 0.25
    assert solve_rate([]) == 0.0


def test_a_stored_summary_gives_the_same_scores_under_any_weights() -> None:
    outcomes = [
        shape("gemm", 0.6, regime="compute", phase="prefill", sid="g1"),
        shape("gemm", 0.2, regime="memory", phase="prefill", sid="g2"),
        shape("norm", 0.5, regime="memory", phase="decode", sid="n1"),
        shape("norm", 0.9, verdict="mixed", regime="memory", phase="decode", sid="n2"),
        shape("norm", 0.7, verdict="fallback-vendor", regime="memory", phase="decode", sid="n3"),
    ]
    summary = summarise(outcomes)
    # Medians per operator and per subset do not depend on the weights.
    assert summary.by_operator == {"gemm": pytest.approx(0.4), "norm": 0.0}
    assert summary.by_subset["memory"] == {"gemm": 0.2, "norm": 0.0}
    assert summary.by_subset["compute"] == {"gemm": 0.6}
    assert (summary.shapes, summary.correct, summary.native) == (5, 5, 3)
    assert (summary.mixed, summary.fallback) == (1, 1)
    stored = SubmissionSummary.from_json(json.loads(json.dumps(summary.as_json())))
    for weights in ({"gemm": 1, "norm": 1}, {"gemm": 0, "norm": 2, "attn": 5}):
        assert combine(stored, weights) == score_submission(outcomes, weights)
    lenient = summarise(outcomes, ScoringPolicy(fallback_scores_zero=False))
    assert lenient.by_operator["norm"] == pytest.approx(0.7)  # median of 0.5, 0.9, 0.7


def test_hidden_shapes_score_apart_and_flag_a_candidate_that_does_not_generalise() -> None:
    def outcome(shape_id: str, attainment: float, *, hidden: bool = False,
                verdict: str = "native", floor: float = 0.9) -> ShapeOutcome:
        return ShapeOutcome(operator="op", shape_id=shape_id, correct=True, verdict=verdict,
                            attainment=attainment, hidden=hidden, attainment_se=0.0,
                            attainment_with_floor=floor, sibling="b" if hidden else None)

    public = [outcome("a", 0.4), outcome("b", 0.6), outcome("c", 0.5)]
    # the hidden shapes: one launch-bound (a low attainment, a_floor at its best), one fallback
    summary = summarise([*public, outcome("h1", 0.9, hidden=True, floor=0.95),
                         outcome("h2", 0.3, hidden=True, verdict="fallback-torch")])
    assert summary.by_operator == {"op": 0.5}  # the hidden shapes do not move the ranked S_op
    assert summary.shapes == 3 and summary.hidden_shapes == 2 and summary.hidden_correct == 2
    assert summary.hidden_by_operator == {"op": pytest.approx(0.45)}  # median of 0.9 and 0 (fallback)
    assert SubmissionSummary.from_json(json.loads(json.dumps(summary.as_json()))) == summary
    score = combine(summary, {"op": 1.0})
    assert score.hidden_by_operator == {"op": pytest.approx(0.45)}
    # both tiers' medians of a_floor: public 0.9, hidden median(0.95, 0) = 0.475, not below
    # 0.9 / 2; the flag compares each hidden shape with its sibling, and h2 fell back
    assert score.generalisation == {"op": {"public": 0.9, "hidden": pytest.approx(0.475)}}
    assert score.not_generalising == ["op"] and score.aggregate == 0.5
    assert [r["why"] for r in score.generalisation_reasons["op"]] == ["fell back"]
    # a decode-heavy hidden tier of an honest kernel: low attainment, a_floor as in public
    launch_bound = summarise([*public, outcome("h3", 0.05, hidden=True),
                              outcome("h4", 0.04, hidden=True)])
    assert launch_bound.hidden_by_operator["op"] < 0.5 / 2  # plain S_op would flag it
    assert combine(launch_bound, {"op": 1.0}).not_generalising == []
    assert combine(summary, {"op": 1.0}, excluded=True).excluded is True
    # the medians' rule, kept for summaries stored before the siblings: below public /
    # factor, exactly; nothing to flag where public is 0 or unknown
    assert operators_not_generalising({"x": 0.4}, {"x": 0.2}, 2.0) == []
    assert operators_not_generalising({"x": 0.4}, {"x": 0.19}, 2.0) == ["x"]
    assert operators_not_generalising({"x": 0.0, "y": None}, {"x": 0.0, "y": 0.0}, 2.0) == []
    # a quarantined hidden shape quarantines the submission, as any shape does
    suspicious = ShapeOutcome(operator="op", shape_id="h3", correct=True, verdict="native",
                              attainment=1.4, hidden=True, suspicious=True)
    assert summarise([*public, suspicious]).ranked is False
