"""Check submissions never reach a board: not ranked, not among "all submissions", not in a
CSV or JSON export, the tokens analysis, a per-operator board or a baseline row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from leaderboard.baselines import baseline_rows
from leaderboard.selectors import analysis_points, operator_board
from leaderboard.services import rescore_submission, weight_set_from_release
from submissions.models import EvaluationJob, Submission
from tests.builders import scored_submission
from tests.world import World, build_world, extended

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class ChecksWorld(World):
    red_submission: Submission  # ranked at 0.3
    teal_submission: Submission  # Teal's, ranked at 0.2
    teal_check: Submission  # Teal's too, checked at 0.9: a check that would lead every board
    gold_check: Submission  # Gold's only submission, checked at 0.8


@pytest.fixture
def world() -> ChecksWorld:
    """All measured on a GPU."""
    world = build_world()
    release = world.release
    weight_set_from_release(release)
    red = scored_submission(release, world.red, {"rms_norm": 0.3, "gemm_fp16": 0.3})
    teal = scored_submission(release, "Teal", {"rms_norm": 0.2, "gemm_fp16": 0.2})
    teal_check = scored_submission(release, "Teal check", {"rms_norm": 0.9, "gemm_fp16": 0.9})
    gold = scored_submission(release, "Gold", {"rms_norm": 0.8, "gemm_fp16": 0.8})
    Submission.objects.filter(pk=teal_check.pk).update(team=teal.team, mode="check")
    Submission.objects.filter(pk=gold.pk).update(mode="check")
    Submission.objects.update(output_tokens=1000)
    EvaluationJob.objects.update(mode="gpu")
    for submission in Submission.objects.all():
        rescore_submission(submission)
    return extended(world, ChecksWorld, red_submission=red, teal_submission=teal,
                    teal_check=teal_check, gold_check=gold)


def export(release_pk: int, path: str = "", **params: str) -> Any:
    return Client().get(f"/api/boards/{release_pk}/H200/{path}", params)


def test_no_board_ranks_or_lists_a_check(world: ChecksWorld) -> None:
    pk = world.release.pk
    rows = export(pk).json()["rows"]
    assert [(r["team"], r["submission"]) for r in rows] == [("Red", world.red_submission.pk),
                                                           ("Teal", world.teal_submission.pk)]
    for board in ("memory", "compute", "prefill", "decode"):
        teams = {r["submission"] for r in export(pk, f"{board}/").json()["rows"]}
        assert not teams & {world.teal_check.pk, world.gold_check.pk}, board
    everything = {r["submission"] for r in export(pk, all="1").json()["rows"]}
    assert everything == {world.red_submission.pk, world.teal_submission.pk}


def test_the_csv_export_and_the_board_page_leave_checks_out(world: ChecksWorld) -> None:
    pk = world.release.pk
    csv = export(pk, format="csv", all="1").content.decode()
    assert "Gold" not in csv and f",{world.teal_check.pk}," not in csv
    html = Client().get(f"/boards/{pk}/H200/", {"all": "1"}).content.decode()
    assert "Gold" not in html and f"#{world.teal_check.pk}<" not in html


def test_the_analysis_and_the_operator_board_leave_checks_out(world: ChecksWorld) -> None:
    release, hardware = world.release, world.red_submission.hardware
    weight_set = release.weight_sets.get(active=True)
    points = analysis_points(release=release, hardware=hardware, weight_set=weight_set)
    assert {p["submission"] for p in points} == {world.red_submission.pk, world.teal_submission.pk}
    board = operator_board(release=release, hardware=hardware, weight_set=weight_set,
                           operator="rms_norm")
    assert [(r["team"], r["submission"]) for r in board["rows"]] == [
        ("Red", world.red_submission.pk), ("Teal", world.teal_submission.pk)]
    analysis = Client().get(f"/api/boards/{release.pk}/H200/analysis/").json()
    assert "Gold" not in {p["team"] for p in analysis["points"]}


def test_a_check_never_stands_as_a_baseline_row(world: ChecksWorld) -> None:
    Submission.objects.filter(pk=world.gold_check.pk).update(baseline="pytorch")
    release = world.release
    rows = baseline_rows(release=release, hardware=world.red_submission.hardware,
                         weight_set=release.weight_sets.get(active=True))
    assert not [r for r in rows if r["submission"] == world.gold_check.pk]
    Submission.objects.filter(pk=world.gold_check.pk).update(mode="ranked")
    rows = baseline_rows(release=release, hardware=world.red_submission.hardware,
                         weight_set=release.weight_sets.get(active=True))
    assert [r["submission"] for r in rows if r["submission"]] == [world.gold_check.pk]


def test_a_check_keeps_its_scores_for_its_team(world: ChecksWorld) -> None:
    score = world.teal_check.scores.get(weight_set__active=True)
    # scored like any, shown on its own page
    assert score.by_operator == pytest.approx({**score.by_operator, "rms_norm": 0.9,
                                               "gemm_fp16": 0.9})
    assert score.aggregate > 0.3
