"""Check submissions never reach a board: not ranked, not among "all submissions", not in a
CSV or JSON export, the tokens analysis, a per-operator board or a baseline row."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from evaluation.catalog.importing import release_import
from leaderboard.selectors import analysis_points, baseline_rows, operator_board
from leaderboard.services import rescore_submission, weight_set_from_release
from submissions.models import EvaluationJob, Submission
from tests.conftest import FIXTURE_RELEASE
from tests.leaderboard.test_boards import scored_submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> dict[str, Any]:
    """Red ranked; Teal ranked at 0.2 and checked at 0.9 (a check that would lead every
    board); Gold only checked. All measured on a GPU."""
    release = release_import(path=FIXTURE_RELEASE).release
    weight_set_from_release(release)
    red = scored_submission(release, "Red", {"rms_norm": 0.3, "gemm_fp16": 0.3})
    teal = scored_submission(release, "Teal", {"rms_norm": 0.2, "gemm_fp16": 0.2})
    teal_check = scored_submission(release, "Teal check", {"rms_norm": 0.9, "gemm_fp16": 0.9})
    gold = scored_submission(release, "Gold", {"rms_norm": 0.8, "gemm_fp16": 0.8})
    Submission.objects.filter(pk=teal_check.pk).update(team=teal.team, mode="check")
    Submission.objects.filter(pk=gold.pk).update(mode="check")
    Submission.objects.update(output_tokens=1000)
    EvaluationJob.objects.update(mode="gpu")
    for submission in Submission.objects.all():
        rescore_submission(submission)
    return {"release": release, "red": red, "teal": teal, "teal_check": teal_check,
            "gold": gold}


def export(release_pk: int, path: str = "", **params: str) -> Any:
    return Client().get(f"/api/boards/{release_pk}/H200/{path}", params)


def test_no_board_ranks_or_lists_a_check(world: dict[str, Any]) -> None:
    pk = world["release"].pk
    rows = export(pk).json()["rows"]
    assert [(r["team"], r["submission"]) for r in rows] == [("Red", world["red"].pk),
                                                           ("Teal", world["teal"].pk)]
    for board in ("memory", "compute", "prefill", "decode"):
        teams = {r["submission"] for r in export(pk, f"{board}/").json()["rows"]}
        assert not teams & {world["teal_check"].pk, world["gold"].pk}, board
    everything = {r["submission"] for r in export(pk, all="1").json()["rows"]}
    assert everything == {world["red"].pk, world["teal"].pk}


def test_the_csv_export_and_the_board_page_leave_checks_out(world: dict[str, Any]) -> None:
    pk = world["release"].pk
    csv = export(pk, format="csv", all="1").content.decode()
    assert "Gold" not in csv and f",{world['teal_check'].pk}," not in csv
    html = Client().get(f"/boards/{pk}/H200/", {"all": "1"}).content.decode()
    assert "Gold" not in html and f"#{world['teal_check'].pk}<" not in html


def test_the_analysis_and_the_operator_board_leave_checks_out(world: dict[str, Any]) -> None:
    release, hardware = world["release"], world["red"].hardware
    weight_set = release.weight_sets.get(active=True)
    points = analysis_points(release=release, hardware=hardware, weight_set=weight_set)
    assert {p["submission"] for p in points} == {world["red"].pk, world["teal"].pk}
    board = operator_board(release=release, hardware=hardware, weight_set=weight_set,
                           operator="rms_norm")
    assert [(r["team"], r["submission"]) for r in board["rows"]] == [
        ("Red", world["red"].pk), ("Teal", world["teal"].pk)]
    analysis = Client().get(f"/api/boards/{release.pk}/H200/analysis/").json()
    assert "Gold" not in {p["team"] for p in analysis["points"]}


def test_a_check_never_stands_as_a_baseline_row(world: dict[str, Any]) -> None:
    Submission.objects.filter(pk=world["gold"].pk).update(baseline="pytorch")
    release = world["release"]
    rows = baseline_rows(release=release, hardware=world["red"].hardware,
                         weight_set=release.weight_sets.get(active=True))
    assert not [r for r in rows if r["submission"] == world["gold"].pk]
    Submission.objects.filter(pk=world["gold"].pk).update(mode="ranked")
    rows = baseline_rows(release=release, hardware=world["red"].hardware,
                         weight_set=release.weight_sets.get(active=True))
    assert [r["submission"] for r in rows if r["submission"]] == [world["gold"].pk]


def test_a_check_keeps_its_scores_for_its_team(world: dict[str, Any]) -> None:
    score = world["teal_check"].scores.get(weight_set__active=True)
    # scored like any, shown on its own page
    assert score.by_operator == pytest.approx({**score.by_operator, "rms_norm": 0.9,
                                               "gemm_fp16": 0.9})
    assert score.aggregate > 0.3
