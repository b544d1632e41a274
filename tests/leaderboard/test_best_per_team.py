"""One rule for a team's best submission on every board: the higher score, then the higher
correctness, then the newer; "not timed" is not 0.

Seen before (CPU, nothing timed): the rms_norm board showed a team's fallback submission
(0.000) over its correct native one (not timed); the memory-bound board showed a 0%-correct
submission as a team's best.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone

from evaluation.catalog.models import HardwareProfile, Release, Shape
from evaluation.catalog.selectors import evaluated_shape_ids
from leaderboard.services import rescore_submission, weight_set_activate, weight_set_create
from portal.accounts.models import Team
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from tests.factories import TeamFactory
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def release() -> Release:
    release = import_fixture_release()
    weights = weight_set_create(release=release, weights={"rms_norm": 1}, source="manual")
    weight_set_activate(weight_set=weights, actor=None)
    return release


def submit(release: Release, team: Team, *, status: str = "passed", verdict: str = "native",
           attainment: float | None = None, minutes_ago: int = 0, note: str = "") -> Submission:
    """rms_norm on every scored shape: one outcome for all of them."""
    submission = Submission.objects.create(team=team, release=release, notes=note,
                                           hardware=HardwareProfile.objects.get(name="H200"))
    Submission.objects.filter(pk=submission.pk).update(
        created_at=timezone.now() - dt.timedelta(minutes=minutes_ago))
    submission.refresh_from_db()
    op = release.operators.get(name="rms_norm")
    candidate = Candidate.objects.create(submission=submission, operator=op, source="",
                                         sha256="0" * 64)
    shapes = evaluated_shape_ids(op)
    job = EvaluationJob.objects.create(candidate=candidate, status="scored", attempts=1,
                                       shape_ids=shapes)
    for shape_id in shapes:
        ShapeResult.objects.create(
            job=job, attempt=1, shape=Shape.objects.get(operator=op, shape_id=shape_id),
            status=status, verdict=verdict if status == "passed" else "",
            attainment=attainment if status == "passed" else 0.0, raw={})
    rescore_submission(submission)
    return submission


def chosen(release: Release, path: str, key: str = "submission") -> list[object]:
    return [row[key] for row in Client().get(f"/api/boards/{release.pk}/H200/{path}").json()["rows"]]


def test_not_timed_is_not_zero_on_the_operator_board(release: Release) -> None:
    red = TeamFactory(name="Red")
    native = submit(release, red, attainment=None, minutes_ago=10)  # correct, native, no GPU
    submit(release, red, verdict="fallback-torch", attainment=None, minutes_ago=5)  # scores 0
    assert chosen(release, "operators/rms_norm/") == [native.pk]
    page = Client().get(f"/boards/{release.pk}/H200/operators/rms_norm/").content.decode()
    assert "not timed" in page and f"#{native.pk}" in page


def test_a_wrong_submission_is_not_a_teams_best_on_a_regime_board(release: Release) -> None:
    red = TeamFactory(name="Red")
    correct = submit(release, red, attainment=None, minutes_ago=10)
    submit(release, red, status="failed", minutes_ago=5)  # 0% correct: every shape 0
    for board in ("", "memory/", "prefill/", "decode/"):
        assert chosen(release, board) == [correct.pk], board
    page = Client().get(f"/boards/{release.pk}/H200/memory/").content.decode()
    assert "not timed" in page


def test_the_higher_score_wins_then_correctness_then_the_newer(release: Release) -> None:
    red, blue, green = (TeamFactory(name=n) for n in ("Red", "Blue", "Green"))
    submit(release, red, attainment=0.4, minutes_ago=30)
    best = submit(release, red, attainment=0.6, minutes_ago=20)
    submit(release, red, attainment=0.5, minutes_ago=10)
    # Blue: two zeros, one wrong and one correct fallback: correctness decides
    submit(release, blue, status="failed", minutes_ago=20)
    fallback = submit(release, blue, verdict="fallback-torch", attainment=0.3, minutes_ago=30)
    # Green: the same score twice: the newer one
    submit(release, green, attainment=0.6, minutes_ago=20)
    newer = submit(release, green, attainment=0.6, minutes_ago=10)
    for board in ("", "memory/", "operators/rms_norm/"):
        rows = Client().get(f"/api/boards/{release.pk}/H200/{board}").json()["rows"]
        by_team = {row["team"]: row["submission"] for row in rows}
        assert by_team == {"Red": best.pk, "Blue": fallback.pk, "Green": newer.pk}, board
    # between teams of equal score the earlier submission leads: Red's 0.6 came first
    assert [row["team"] for row in Client().get(
        f"/api/boards/{release.pk}/H200/").json()["rows"]] == ["Red", "Green", "Blue"]
