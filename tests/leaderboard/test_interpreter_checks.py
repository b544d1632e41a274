"""Boards never rank a run in Triton's CPU interpreter: a check of correctness and adoption,
not a measurement on the hardware the board is for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from evaluation.catalog.models import Release
from leaderboard.models import SubmissionScore
from leaderboard.selectors import analysis_points, operator_board
from leaderboard.services import rescore_submission, weight_set_from_release
from submissions.models import EvaluationJob, Submission
from tests.builders import scored_submission
from tests.world import World, build_world, extended

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class InterpreterWorld(World):
    red_submission: Submission  # measured on a GPU
    teal_submission: Submission  # checked in the interpreter, with numbers that would beat Red's


@pytest.fixture
def world() -> InterpreterWorld:
    """An interpreter run has no times: the exclusion must not depend on that."""
    world = build_world()
    release = world.release
    weight_set_from_release(release)
    red = scored_submission(release, world.red, {"rms_norm": 0.3, "gemm_fp16": 0.3})
    teal = scored_submission(release, "Teal", {"rms_norm": 0.9, "gemm_fp16": 0.9})
    EvaluationJob.objects.filter(candidate__submission=red).update(mode="gpu")
    EvaluationJob.objects.filter(candidate__submission=teal).update(mode="cpu-interpreter")
    Submission.objects.filter(pk__in=[red.pk, teal.pk]).update(output_tokens=1000)
    for submission in (red, teal):
        rescore_submission(submission)
    return extended(world, InterpreterWorld, red_submission=red, teal_submission=teal)


def rows(release: Release, **params: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = Client().get(f"/api/boards/{release.pk}/H200/",
                                               params).json()["rows"]
    return found


def test_a_submission_checked_in_the_interpreter_is_never_ranked(world: InterpreterWorld) -> None:
    release = world.release
    assert [(r["team"], r["rank"]) for r in rows(release)] == [("Red", 1)]
    for board in ("memory", "prefill", "decode"):
        ranked = Client().get(f"/api/boards/{release.pk}/H200/{board}/").json()["rows"]
        assert "Teal" not in {r["team"] for r in ranked}, board
    everything = {r["team"]: r for r in rows(release, all="1")}
    assert everything["Teal"]["rank"] is None and everything["Red"]["rank"] == 1
    assert "interpreter check: not ranked" in everything["Teal"]["badges"]
    assert "interpreter check: not ranked" not in everything["Red"]["badges"]


def test_the_interpreter_check_is_stored_with_the_score(world: InterpreterWorld) -> None:
    assert SubmissionScore.objects.get(submission=world.teal_submission).interpreter_jobs == 2
    assert SubmissionScore.objects.get(submission=world.red_submission).interpreter_jobs == 0


def test_operator_boards_and_the_tokens_analysis_leave_interpreter_checks_out(
        world: InterpreterWorld) -> None:
    release = world.release
    weight_set = release.weight_sets.get(active=True)
    hardware = world.red_submission.hardware
    board = operator_board(release=release, hardware=hardware, weight_set=weight_set,
                           operator="rms_norm")
    assert [r["team"] for r in board["rows"]] == ["Red"]
    points = analysis_points(release=release, hardware=hardware, weight_set=weight_set)
    assert [p["team"] for p in points] == ["Red"]


def test_the_board_page_says_why_interpreter_checks_are_missing(world: InterpreterWorld) -> None:
    EvaluationJob.objects.filter(candidate__submission=world.red_submission).update(
        mode="cpu-interpreter")
    rescore_submission(world.red_submission)
    html = Client().get(f"/boards/{world.release.pk}/H200/").content.decode()
    assert "No ranked submission on this board yet" in html and "Interpreter checks" in html
