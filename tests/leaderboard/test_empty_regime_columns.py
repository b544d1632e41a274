"""A regime or phase no shape of the release falls in shows "–" on the board, not "not timed"
(which means a correct shape without a GPU time)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from evaluation.catalog.models import HardwareProfile, Shape
from leaderboard.selectors import board_has_shapes
from leaderboard.services import rescore_weight_set, summaries_rebuild, weight_set_from_release
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from tests.factories import TeamFactory
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def test_a_column_without_shapes_shows_a_dash_and_says_why(settings: Any) -> None:
    settings.ATREX_SHAPE_FILTER = "dev-*"  # tiny shapes: none of them compute-bound on H200
    release = import_fixture_release()
    weight_set = weight_set_from_release(release)
    hardware = HardwareProfile.objects.get(name="H200")
    assert not board_has_shapes(release, hardware, "compute")
    assert board_has_shapes(release, hardware, "memory")
    submission = Submission.objects.create(team=TeamFactory(name="Red"), release=release,
                                           hardware=hardware)
    for op in release.operators.all():
        candidate = Candidate.objects.create(submission=submission, operator=op, source="",
                                             sha256="0" * 64)
        job = EvaluationJob.objects.create(candidate=candidate, status="scored", attempts=1)
        for shape in Shape.objects.filter(operator=op, shape_id__startswith="dev-"):
            ShapeResult.objects.create(job=job, attempt=1, shape=shape, status="passed",
                                       verdict="native", attainment=None, raw={})  # untimed
    summaries_rebuild(release)
    rescore_weight_set(weight_set)

    page = Client().get(f"/boards/{release.pk}/H200/?all=1").content.decode()
    cell = re.search(r'<td data-label="Compute-bound" class="num"( title="[^"]*")?>([^<]*)</td>',
                     page)
    assert cell is not None
    assert cell.group(2) == "–" and "no shape of this release is in Compute-bound" in cell.group(1)
    memory = re.search(r'<td data-label="Memory-bound" class="num">([^<]*)</td>', page)
    assert memory is not None and memory.group(1) == "not timed"  # correct, but no GPU time
