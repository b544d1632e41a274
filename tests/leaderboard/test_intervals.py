"""Confidence on every score: intervals from timing samples, and ties on boards.

A shape's time error comes from its samples (the bootstrap of the median, never below the
timer's step: tests/evaluation/test_confidence.py), S_op's from its shapes', S_agg's from
the operators'; a board shares a rank between rows whose difference a two-sample test at
95% cannot tell from chance, and badges them "tie". A weight change rescored in bulk keeps the intervals: they
are recomputed from the stored per-shape errors, nothing is run again.
"""

from __future__ import annotations

import math
from typing import Any
from unittest import mock

import pytest
from django.test import Client

from evaluation.catalog.models import HardwareProfile, Release, Shape
from evaluation.harness.confidence import median_standard_error
from leaderboard.scoring import (
    ShapeOutcome,
    attainment_error,
    combine,
    operator_standard_error,
    summarise,
)
from leaderboard.selectors import COLUMNS, assign_ranks
from leaderboard.services import weight_set_activate, weight_set_create
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from tests.factories import TeamFactory
from tests.world import import_fixture_release

TICK = 32e-9


def _shapes(operator: str, values: list[tuple[float, float | None]]) -> list[ShapeOutcome]:
    return [ShapeOutcome(operator=operator, shape_id=str(i), correct=True, verdict="native",
                         attainment=a, attainment_se=se) for i, (a, se) in enumerate(values)]


def test_operator_and_aggregate_intervals_follow_the_shapes_errors() -> None:
    norm = _shapes("rms_norm", [(0.40, 0.004), (0.50, 0.005), (0.60, 0.006)])
    gemm = _shapes("gemm", [(0.30, 0.0), (0.30, 0.0)])  # exact: no spread at all
    failed = [ShapeOutcome(operator="gemm", shape_id="9", correct=False, verdict=None,
                           attainment=None)]
    score = combine(summarise([*norm, *gemm, *failed]), {"rms_norm": 3, "gemm": 1, "absent": 0})
    se_norm = operator_standard_error([(0.40, 0.004), (0.50, 0.005), (0.60, 0.006)])
    assert 0 < se_norm < 0.006
    low, high = score.intervals["by_operator"]["rms_norm"]
    assert math.isclose(high - 0.50, 1.96 * se_norm) and math.isclose(0.50 - low, 1.96 * se_norm)
    # a failed shape scores 0 with certainty, and the exact shapes carry no error either
    assert score.intervals["by_operator"]["gemm"] == [0.30, 0.30]
    # S_agg = 0.75 * 0.5 + 0.25 * 0.3; its error is the weighted operators' errors combined
    low, high = score.intervals["aggregate"]
    assert math.isclose((low + high) / 2, 0.75 * 0.50 + 0.25 * 0.30)
    assert math.isclose((high - low) / 2, 1.96 * 0.75 * se_norm)


def test_a_shape_without_an_error_leaves_its_operator_and_the_aggregate_unknown() -> None:
    outcomes = [*_shapes("rms_norm", [(0.5, 0.005), (0.5, None)]), *_shapes("gemm", [(0.3, 0.0)])]
    score = combine(summarise(outcomes), {"rms_norm": 1, "gemm": 1})
    assert score.intervals["by_operator"]["rms_norm"] is None
    assert score.intervals["by_operator"]["gemm"] == [0.3, 0.3]
    assert score.intervals["aggregate"] is None
    assert attainment_error(0.5, 2e-6, 2e-8) == pytest.approx(0.005)
    assert attainment_error(0.5, 2e-6, None) is None


def _row(value: float, half: float | None) -> dict[str, Any]:
    return {"aggregate": value, "interval": None if half is None else [value - half, value + half],
            "badges": []}


def _rows(*pairs: tuple[float, float | None]) -> list[dict[str, Any]]:
    """Board rows (score, standard error) with the 95% interval scoring would give them."""
    return [{"aggregate": v, "ranked_by": "aggregate", "badges": [],
             "interval": None if se is None else [max(0.0, v - 1.96 * se), v + 1.96 * se]}
            for v, se in pairs]


def _ranks(rows: list[dict[str, Any]]) -> list[tuple[int, bool]]:
    assign_ranks(rows)
    return [(r["rank"], "tie" in r["badges"]) for r in rows]


def test_a_three_percent_gap_is_a_rank_with_tight_intervals_and_a_tie_with_wide_ones() -> None:
    # S 0.500 and 0.485 (3% apart): errors of 0.5% of the score make it 4.2 standard errors
    assert _ranks(_rows((0.500, 0.0025), (0.485, 0.0025))) == [(1, False), (2, False)]
    # errors of 2.5%: the difference is within chance (0.015 < 1.96 * 0.0177)
    assert _ranks(_rows((0.500, 0.0125), (0.485, 0.0125))) == [(1, True), (1, True)]
    # a gap the overlapping intervals tied (0.012 < 1.96 * (0.004 + 0.004)) and the test of
    # the difference does not (0.012 > 1.96 * sqrt(2) * 0.004 = 0.0111)
    assert _ranks(_rows((0.500, 0.004), (0.488, 0.004))) == [(1, False), (2, False)]
    # equal scores tie, certain ones too
    assert _ranks(_rows((0.3, 0.0), (0.3, 0.0))) == [(1, True), (1, True)]


def test_ranks_never_go_down_the_board_and_a_row_without_an_interval_ranks_by_position(
        ) -> None:
    rows = _rows((0.50, 0.005), (0.495, 0.005), (0.40, 0.005), (0.30, None), (0.29, 0.01),
                 (0.20, 0.0005))
    assert _ranks(rows) == [(1, True), (1, True), (3, False), (4, False), (5, False),
                            (6, False)]
    # a wide row above ties with both rows below it, which are apart from each other: the
    # lowest is 1 + the one row clearly better than it, and never ranks better than a row
    # scoring higher
    assert [r for r, _ in _ranks(_rows((0.50, 0.03), (0.46, 0.002), (0.45, 0.002)))] == [1, 1, 2]
    # a wide row in the middle does not tie with the narrow leader (its own width counts
    # only up to the leader's), and ties the row below it
    assert [r for r, _ in _ranks(_rows((0.50, 0.002), (0.49, 0.03), (0.46, 0.002)))] == [1, 2, 2]
    # the same scores always give the same ranks (no draw, nothing but the rows)
    scores = [(0.6 - 0.003 * k, 0.002 + 0.001 * (k % 3)) for k in range(40)]
    first, again = _ranks(_rows(*scores)), _ranks(_rows(*scores))
    assert first == again and [r for r, _ in first] == sorted(r for r, _ in first)
    # each rank is 1 + the rows above that are clearly better (checked one pair at a time)
    for position, (rank, _) in enumerate(first):
        better = sum(s - scores[position][0] > 1.96 * math.hypot(e, min(scores[position][1], e))
                     for s, e in scores[:position])
        assert rank == max([1 + better] + [r for r, _ in first[:position]])


def test_a_row_cannot_buy_a_shared_rank_by_spreading_its_own_samples() -> None:
    # The leader 0.50 (se 0.002); a kernel 10% slower, 0.45, honest (se 0.002) or reporting
    # samples spread around its right median (se 0.2: half its samples at 0.5x, half at
    # 1.5x). With the lower row's error counted in full it would tie with the leader; its
    # error counts only up to the leader's, so it ranks second either way.
    assert _ranks(_rows((0.50, 0.002), (0.45, 0.002))) == [(1, False), (2, False)]
    assert _ranks(_rows((0.50, 0.002), (0.45, 0.2))) == [(1, False), (2, False)]
    # the leader's own uncertainty still ties the rows below it
    assert _ranks(_rows((0.50, 0.2), (0.45, 0.002))) == [(1, True), (1, True)]


def _submission(release: Release, team: str, medians: dict[str, list[float]],
                samples_kept: bool = True) -> Submission:
    """A submission whose shapes of each operator ran at the given samples (seconds): median
    and its error stored as the harness reports them, attainment = SOL / median. Without
    `samples_kept`, as a recorded result: the median alone."""
    submission = Submission.objects.create(team=TeamFactory(name=team), release=release,
                                           hardware=HardwareProfile.objects.get(name="H200"))
    for operator, samples in medians.items():
        op = release.operators.get(name=operator)
        candidate = Candidate.objects.create(submission=submission, operator=op, sha256="0" * 64,
                                             source="class Model: pass", dsl="triton")
        job = EvaluationJob.objects.create(candidate=candidate, status="scored", attempts=1)
        median = sorted(samples)[len(samples) // 2]
        for shape in Shape.objects.filter(operator=op):
            sol = 1e-6
            ShapeResult.objects.create(
                job=job, attempt=1, shape=shape, status="passed", verdict="native", raw={},
                median_s=median,
                median_se_s=median_standard_error(samples) if samples_kept else None,
                sol_s=sol, attainment=sol / median)
    return submission


def _ticks(center: float, spread: int) -> list[float]:
    """Samples in whole ticks, evenly `spread` ticks either side of `center`'s tick."""
    return [(round(center / TICK) + step) * TICK for step in range(-spread, spread + 1)
            for _ in range(5)]


@pytest.mark.django_db
def test_a_board_with_known_samples_marks_the_tie_and_a_bulk_rescore_keeps_the_intervals(
        ) -> None:
    release = import_fixture_release()
    # the leader's samples wide enough (10 ticks either side) for a row a tick behind (S_op
    # 0.496 against 0.504) to be within chance: 0.008 < 1.96 * sqrt(0.0040^2 + 0.0019^2) =
    # 0.0087 (6 ticks either side, S_op's error 0.0033, tied only under the old overlap
    # rule). The other way round (the wide row behind) they would not tie: a lower row's
    # error counts only up to the higher row's (selectors.clearly_better).
    _submission(release, "Steady", {"rms_norm": _ticks(2.0e-6, 10)})
    _submission(release, "Close", {"rms_norm": _ticks(2.0e-6 + TICK, 1)})
    _submission(release, "Slow", {"rms_norm": _ticks(4.0e-6, 1)})
    norm_only = weight_set_create(release=release, weights={"rms_norm": 1}, source="manual")
    with mock.patch("submissions.jobs.dispatch_job") as dispatch:
        weight_set_activate(weight_set=norm_only, actor=None)
    dispatch.assert_not_called()  # rescoring runs nothing again
    rows = Client().get(f"/api/boards/{release.pk}/H200/").json()["rows"]
    assert [(r["team"], r["rank"], "tie" in r["badges"]) for r in rows] == [
        ("Steady", 1, True), ("Close", 1, True), ("Slow", 3, False)]
    assert all(r["interval"][0] <= r["aggregate"] <= r["interval"][1] for r in rows)
    page = Client().get(f"/boards/{release.pk}/H200/").content.decode()
    assert 'class="badge tie"' in page and '<small class="interval">± 0.0' in page
    assert "share a rank and are marked <em>tie</em>" in page
    # the operator's own board ranks by S_op with its interval, the same way
    op_rows = Client().get(f"/api/boards/{release.pk}/H200/operators/rms_norm/").json()["rows"]
    assert [(r["team"], r["rank"], "tie" in r["badges"]) for r in op_rows] == [
        ("Steady", 1, True), ("Close", 1, True), ("Slow", 3, False)]
    op_page = Client().get(f"/boards/{release.pk}/H200/operators/rms_norm/").content.decode()
    assert op_page.count('class="badge tie"') == 2 and '<small class="interval">± 0.0' in op_page
    # another weight set, activated in bulk: the intervals come back from stored statistics
    with_gemm = weight_set_create(release=release, weights={"rms_norm": 1, "gemm_fp16": 1},
                                  source="manual")
    weight_set_activate(weight_set=with_gemm, actor=None)
    rows = Client().get(f"/api/boards/{release.pk}/H200/").json()["rows"]
    assert [r["rank"] for r in rows] == [1, 1, 3]
    halves = [(r["interval"][1] - r["aggregate"]) for r in rows]
    assert all(h > 0 for h in halves)
    csv_rows = Client().get(f"/api/boards/{release.pk}/H200/?format=csv").content.decode()
    assert csv_rows.splitlines()[0].endswith("interval_low,interval_high,environment")


@pytest.mark.django_db
def test_a_score_recorded_without_samples_says_no_interval_and_ranks_by_position() -> None:
    release = import_fixture_release()
    _submission(release, "Steady", {"rms_norm": _ticks(2.0e-6, 1)})
    _submission(release, "Recorded", {"rms_norm": _ticks(2.0e-6 + TICK, 10)}, samples_kept=False)
    weight_set_activate(weight_set=weight_set_create(
        release=release, weights={"rms_norm": 1}, source="manual"), actor=None)
    rows = Client().get(f"/api/boards/{release.pk}/H200/").json()["rows"]
    # the same scores as the tied pair above, but nothing says how far the second could move
    assert [(r["team"], r["rank"], r["interval"] is None, r["badges"]) for r in rows] == [
        ("Steady", 1, False, []), ("Recorded", 2, True, ["no interval"])]
    page = Client().get(f"/boards/{release.pk}/H200/").content.decode()
    assert '<small class="interval">no interval</small>' in page
    assert 'class="badge no interval">no interval</span>' in page
    op_rows = Client().get(f"/api/boards/{release.pk}/H200/operators/rms_norm/").json()["rows"]
    assert [(r["team"], r["badges"]) for r in op_rows] == [("Steady", []),
                                                           ("Recorded", ["no interval"])]
    csv_text = Client().get(f"/api/boards/{release.pk}/H200/?format=csv").content.decode()
    assert csv_text.splitlines()[2].split(",")[COLUMNS.index("badges")] == "no interval"


def test_the_ranks_are_the_pairwise_tests_whatever_the_mix_of_errors() -> None:
    """assign_ranks tests only the rows above within reach; on a board whose errors span
    three orders of magnitude (and rows without one), the ranks are still those of every
    pair tested (`clearly_better`)."""
    import random

    from leaderboard.selectors import clearly_better

    rng = random.Random(42)
    pairs = sorted(((rng.uniform(0.0, 1.0), None if rng.random() < 0.05
                     else rng.choice((0.0, 1e-4, 1e-3, 1e-2, 0.05)) * rng.random())
                    for _ in range(300)), key=lambda p: -p[0])
    ranks = [r for r, _ in _ranks(_rows(*pairs))]
    expected: list[int] = []
    for position, (score, error) in enumerate(pairs):
        not_better = 0 if error is None else sum(
            higher_error is not None and not clearly_better(
                (higher, higher_error), (score, max(0.0, error)))
            for higher, higher_error in pairs[:position])
        expected.append(max([1 + position - not_better, *expected[-1:]]))
    assert ranks == expected
    assert len(set(ranks)) < len(ranks)  # some rows tie: the test has something to check
