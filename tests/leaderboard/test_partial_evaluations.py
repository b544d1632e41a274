"""Boards rank whole evaluations only: a submission enters when every job has ended.

Seen before: when one job of a submission finished, its other operators counted 0, and a
running operator was ranked on the shapes reported so far (3 of 14), with no badge; a job
the sweeper abandoned never rescored the submission.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.test import Client, override_settings

from evaluation.catalog.models import HardwareProfile, Release, Shape
from evaluation.catalog.selectors import evaluated_shape_ids
from leaderboard.services import rescore_submission, weight_set_activate, weight_set_create
from submissions.jobs import job_cancel, jobs_sweep
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from tests.factories import TeamFactory
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def release() -> Release:
    release = import_fixture_release()
    weights = weight_set_create(release=release, weights={"rms_norm": 1, "silu_and_mul": 1},
                                source="manual")
    weight_set_activate(weight_set=weights, actor=None)
    return release


def submission(release: Release, team: str = "Red") -> Submission:
    return Submission.objects.create(team=TeamFactory(name=team), release=release,
                                     hardware=HardwareProfile.objects.get(name="H200"))


def job(submission: Submission, operator: str, *, status: str = "running",
        report: int | None = None, attainment: float = 0.5) -> EvaluationJob:
    """A job over the operator's scored tier that has reported its first `report` shapes."""
    op = submission.release.operators.get(name=operator)
    shapes = evaluated_shape_ids(op)
    candidate = Candidate.objects.create(submission=submission, operator=op, source="",
                                         sha256="0" * 64)
    created = EvaluationJob.objects.create(candidate=candidate, status=status, attempts=1,
                                           shapes_total=len(shapes), shape_ids=shapes)
    for shape_id in shapes[:len(shapes) if report is None else report]:
        ShapeResult.objects.create(job=created, attempt=1, status="passed", verdict="native",
                                   attainment=attainment, raw={},
                                   shape=Shape.objects.get(operator=op, shape_id=shape_id))
    return created


def board(release: Release, **params: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = Client().get(f"/api/boards/{release.pk}/H200/", params).json()["rows"]
    return rows


def test_a_submission_with_a_job_still_running_is_not_ranked(release: Release) -> None:
    red = submission(release)
    job(red, "rms_norm", status="scored", attainment=0.8)
    running = job(red, "silu_and_mul", report=2, attainment=0.9)  # 2 of 5 shapes so far
    rescore_submission(red)  # as after the first job's result
    assert board(release) == []
    [row] = board(release, all="1")
    assert row["rank"] is None and "evaluating" in row["badges"]
    score = red.scores.get()
    assert score.complete is False and score.unevaluated_shapes == 0

    for shape_id in running.shape_ids[2:]:  # the rest arrives, and the result
        ShapeResult.objects.create(job=running, attempt=1, status="passed", verdict="native",
                                   attainment=0.9, raw={},
                                   shape=Shape.objects.get(operator__release=release,
                                                           operator__name="silu_and_mul",
                                                           shape_id=shape_id))
    EvaluationJob.objects.filter(pk=running.pk).update(status="scored")
    rescore_submission(red)
    [row] = board(release)
    assert row["rank"] == 1 and row["aggregate"] == pytest.approx((0.8 + 0.9) / 2)
    assert row["badges"] == ["no interval"]  # results stored without timing samples


def test_a_cancelled_jobs_missing_shapes_score_zero_and_say_so(release: Release) -> None:
    red = submission(release)
    job(red, "rms_norm", status="scored", attainment=0.8)
    cancelled = job(red, "silu_and_mul", report=2, attainment=0.9)  # 2 of 5, then cancelled
    with mock.patch("submissions.jobs.current_app"):
        assert job_cancel(job=cancelled)
    rescore_submission(red)
    [row] = board(release)
    # silu_and_mul: median of [0.9, 0.9, 0, 0, 0] = 0; rms_norm 0.8: S_agg 0.4
    assert row["rank"] == 1 and row["aggregate"] == pytest.approx(0.4)
    assert "3 shapes not evaluated (0)" in row["badges"]
    assert red.scores.get().unevaluated_shapes == 3
    page = Client().get(f"/boards/{release.pk}/H200/").content.decode()
    assert "3 shapes not evaluated (0)" in page


@override_settings(ATREX_JOB_MAX_ATTEMPTS=1, ATREX_JOB_STALE_SECONDS=90)
def test_an_abandoned_job_rescores_its_submission_and_keeps_it_off_the_boards(
        release: Release, django_capture_on_commit_callbacks: Any) -> None:
    red = submission(release)
    job(red, "rms_norm", status="scored", attainment=0.8)
    stale = job(red, "silu_and_mul", report=2)
    rescore_submission(red)
    with mock.patch("submissions.jobs.current_app") as celery, \
            django_capture_on_commit_callbacks(execute=True):
        report = jobs_sweep()
    assert report.failed == [stale.pk]
    assert [c.kwargs["args"] for c in celery.send_task.call_args_list
            if c.args[0] == "leaderboard.rescore_submission"] == [[red.pk]]
    rescore_submission(red)  # what that task does
    assert board(release) == []
    [row] = board(release, all="1")
    assert row["rank"] is None
    assert "evaluation lost (infrastructure): not ranked until re-run" in row["badges"]
    score = red.scores.get()
    assert score.lost_jobs == 1 and score.complete is False


def test_every_way_a_job_ends_or_restarts_asks_for_a_rescore(
        release: Release, django_capture_on_commit_callbacks: Any) -> None:
    from submissions.jobs import job_rerun, record_event

    red = submission(release)
    first = job(red, "rms_norm", status="running", report=0)
    second = job(red, "silu_and_mul", status="running", report=0)
    ids = {"attempt": 1, "worker": "w", "run": "r"}
    with mock.patch("submissions.jobs.current_app") as celery, \
            django_capture_on_commit_callbacks(execute=True):
        record_event("failed", {**ids, "job_id": first.pk, "reason": "x", "infrastructure": True})
        assert job_cancel(job=second)
        job_rerun(job=first, actor=None)
    rescored = [c.kwargs["args"] for c in celery.send_task.call_args_list
                if c.args[0] == "leaderboard.rescore_submission"]
    assert rescored == [[red.pk]] * 3
