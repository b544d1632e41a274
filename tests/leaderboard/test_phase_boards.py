"""Phase boards count each shape in its own phase, where the release gives shapes one.

Seen before: the boards used the operator's phase, so on the starter release the decode
board held 68 prefill shapes and the prefill board 78 decode shapes (rms_norm serves both
phases; its decode shapes are decode work, its prefill shapes prefill work).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.test import Client

from evaluation.catalog.importing import release_import
from evaluation.catalog.models import HardwareProfile, Release, Shape
from leaderboard.services import rescore_submission, weight_set_activate, weight_set_create
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from tests.factories import TeamFactory
from tests.paths import FIXTURE_RELEASE

pytestmark = pytest.mark.django_db


@pytest.fixture
def release(tmp_path: Path) -> Release:
    """The fixture release, its rms_norm shapes each given the phase its id names."""
    folder = tmp_path / "release"
    shutil.copytree(FIXTURE_RELEASE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    path = folder / "data" / "rms_norm" / "metadata.json"
    metadata = json.loads(path.read_text())
    assert metadata["phase"] == "prefill/decode"
    for shape_id, entry in metadata["shapes"].items():
        if not shape_id.startswith("dev-"):
            entry["phase"] = "decode" if "-decode-" in shape_id else "prefill"
    path.write_text(json.dumps(metadata))
    release = release_import(path=folder).release
    weights = weight_set_create(release=release, weights={"rms_norm": 1}, source="manual")
    weight_set_activate(weight_set=weights, actor=None)
    return release


def scored(release: Release, team: str, decode: float, prefill: float) -> Submission:
    submission = Submission.objects.create(team=TeamFactory(name=team), release=release,
                                           hardware=HardwareProfile.objects.get(name="H200"))
    op = release.operators.get(name="rms_norm")
    candidate = Candidate.objects.create(submission=submission, operator=op, source="",
                                         sha256="0" * 64)
    shapes = [s for s in Shape.objects.filter(operator=op) if not s.shape_id.startswith("dev-")]
    job = EvaluationJob.objects.create(candidate=candidate, status="scored", attempts=1,
                                       shape_ids=[s.shape_id for s in shapes])
    for shape in shapes:
        ShapeResult.objects.create(job=job, attempt=1, shape=shape, status="passed",
                                   verdict="native", raw={},
                                   attainment=decode if "-decode-" in shape.shape_id else prefill)
    rescore_submission(submission)
    return submission


def ranking(release: Release, board: str) -> list[tuple[str, float]]:
    rows = Client().get(f"/api/boards/{release.pk}/H200/{board}/").json()["rows"]
    return [(r["team"], round(r[board], 6)) for r in rows]


def test_the_decode_board_counts_decode_shapes_and_the_prefill_board_prefill_shapes(
        release: Release) -> None:
    # rms_norm's scored tier: 2 decode shapes, 4 prefill shapes.
    scored(release, "Fast decode", decode=0.9, prefill=0.2)
    scored(release, "Fast prefill", decode=0.3, prefill=0.7)
    assert ranking(release, "decode") == [("Fast decode", 0.9), ("Fast prefill", 0.3)]
    assert ranking(release, "prefill") == [("Fast prefill", 0.7), ("Fast decode", 0.2)]
    # the aggregate still takes every shape: medians of [0.9 x2, 0.2 x4], [0.3 x2, 0.7 x4]
    rows = Client().get(f"/api/boards/{release.pk}/H200/").json()["rows"]
    assert [(r["team"], round(r["aggregate"], 6)) for r in rows] == [
        ("Fast prefill", 0.7), ("Fast decode", 0.2)]


def test_shapes_without_a_phase_of_their_own_take_their_operators(release: Release) -> None:
    # silu_and_mul's shapes carry no phase: the operator's ("prefill/decode") counts for all.
    submission = Submission.objects.create(team=TeamFactory(name="Red"), release=release,
                                           hardware=HardwareProfile.objects.get(name="H200"))
    op = release.operators.get(name="silu_and_mul")
    metadata = op.hidden.metadata
    assert "prefill" in metadata["phase"] and "decode" in metadata["phase"]
    candidate = Candidate.objects.create(submission=submission, operator=op, source="",
                                         sha256="0" * 64)
    shapes = [s for s in Shape.objects.filter(operator=op) if not s.shape_id.startswith("dev-")]
    job = EvaluationJob.objects.create(candidate=candidate, status="scored", attempts=1,
                                       shape_ids=[s.shape_id for s in shapes])
    for shape in shapes:
        ShapeResult.objects.create(job=job, attempt=1, shape=shape, status="passed",
                                   verdict="native", attainment=0.6, raw={})
    weights = weight_set_create(release=release, weights={"silu_and_mul": 1}, source="manual")
    weight_set_activate(weight_set=weights, actor=None)
    rescore_submission(submission)
    assert ranking(release, "decode") == [("Red", 0.6)]
    assert ranking(release, "prefill") == [("Red", 0.6)]
