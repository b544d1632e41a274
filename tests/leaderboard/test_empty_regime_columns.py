"""A regime or phase no shape of the release falls in shows "–" on the board, not "not timed"
(which means a correct shape without a GPU time)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from evaluation.catalog.models import HardwareProfile, Shape
from evaluation.harness.release import DTYPE_TO_PEAK_PATH
from leaderboard.selectors import board_has_shapes
from leaderboard.services import rescore_weight_set, summaries_rebuild, weight_set_from_release
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from tests.factories import TeamFactory
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def interpreter_check_of_dev_shapes(release: Any, hardware: HardwareProfile) -> Submission:
    """A ranked-mode submission of every operator whose jobs covered the dev tier only, each
    shape correct and untimed (a CPU portal's interpreter run)."""
    submission = Submission.objects.create(team=TeamFactory(name="Red"), release=release,
                                           hardware=hardware)
    for op in release.operators.all():
        candidate = Candidate.objects.create(submission=submission, operator=op, source="",
                                             sha256="0" * 64)
        dev = Shape.objects.filter(operator=op, shape_id__startswith="dev-")
        job = EvaluationJob.objects.create(candidate=candidate, status="scored", attempts=1,
                                           shape_ids=[s.shape_id for s in dev])
        for shape in dev:
            ShapeResult.objects.create(job=job, attempt=1, shape=shape, status="passed",
                                       verdict="native", attainment=None, raw={})  # untimed
    return submission


def cell(page: str, label: str) -> tuple[str, str]:
    found = re.search(rf'<td data-label="{label}" class="num"( title="[^"]*")?>([^<]*)</td>', page)
    assert found is not None, label
    return found.group(2), found.group(1) or ""


def test_subset_boards_span_the_scored_tier_whatever_the_deployment_evaluates(
        settings: Any) -> None:
    settings.ATREX_SHAPE_FILTER = "dev-*"  # tiny shapes: none of them compute-bound on H200
    release = import_fixture_release()
    hardware = HardwareProfile.objects.get(name="H200")
    # the release's real sizes hold compute-bound shapes and both phases on an H200
    for board in ("memory", "compute", "prefill", "decode"):
        assert board_has_shapes(release, hardware, board), board


def test_an_untimed_check_is_not_timed_on_a_subset_its_shapes_miss_not_zero(
        settings: Any) -> None:
    settings.ATREX_SHAPE_FILTER = "dev-*"
    release = import_fixture_release()
    weight_set = weight_set_from_release(release)
    interpreter_check_of_dev_shapes(release, HardwareProfile.objects.get(name="H200"))
    summaries_rebuild(release)
    rescore_weight_set(weight_set)

    page = Client().get(f"/boards/{release.pk}/H200/?all=1").content.decode()
    assert cell(page, "Compute-bound")[0] == "not timed"  # correct, but no GPU time
    assert cell(page, "Memory-bound")[0] == "not timed"


def test_a_column_without_shapes_shows_a_dash_and_says_why() -> None:
    release = import_fixture_release()
    weight_set = weight_set_from_release(release)
    # bandwidth so high that the ridge point is near 0: every shape is compute-bound
    peaks = dict.fromkeys(DTYPE_TO_PEAK_PATH.values(), 1e15)
    wide = HardwareProfile.objects.create(name="WIDE", peak_flops=peaks, hbm_bytes_per_s=1e30,
                                          launch_floor_s=0.0)
    assert not board_has_shapes(release, wide, "memory")
    interpreter_check_of_dev_shapes(release, wide)
    summaries_rebuild(release)
    rescore_weight_set(weight_set)

    page = Client().get(f"/boards/{release.pk}/WIDE/?all=1").content.decode()
    text, title = cell(page, "Memory-bound")
    assert text == "–" and "no shape of this release is in Memory-bound" in title
