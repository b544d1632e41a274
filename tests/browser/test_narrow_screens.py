"""The main pages on a phone (390 px wide): nothing makes the page scroll sideways; wide
tables scroll inside their own box."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from playwright.sync_api import Page

from leaderboard.models import WeightSet
from leaderboard.services import rescore_weight_set, summaries_rebuild, weight_set_from_release
from submissions.models import EvaluationJob, ShapeResult, Submission
from tests.browser.conftest import sign_in
from tests.builders import scored_submission
from tests.world import World, build_world, extended

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}
PASSWORD = "correct horse battery"  # tests.factories.UserFactory's
LONG_ERROR = ("correctness failed: output 'out' differs from the reference: max abs error "
              "0.53125 at index (3, 127) > atol 0.01 + rtol 0.01 * |expected|; "
              "Traceback_without_spaces_" + "x" * 120)


@dataclass(frozen=True)
class PhoneWorld(World):
    red_submission: Submission  # a failed shape with a long error and fallback evidence


@pytest.fixture
def world() -> PhoneWorld:
    """Two ranked teams; Red's submission has a failed shape with a long error and
    fallback evidence; an admin without a team."""
    world = build_world()
    release = world.release
    weight_set_from_release(release)
    red = scored_submission(release, world.red, {"rms_norm": 0.8, "gemm_fp16": 0.2})
    scored_submission(release, world.blue, {"rms_norm": 0.2, "gemm_fp16": 0.6})
    for job in EvaluationJob.objects.all():
        shapes = job.results.count()
        EvaluationJob.objects.filter(pk=job.pk).update(shapes_total=shapes, shapes_done=shapes)
    wrong = ShapeResult.objects.filter(job__candidate__submission=red).order_by("pk").first()
    assert wrong is not None
    ShapeResult.objects.filter(pk=wrong.pk).update(
        status="failed", failed_stage="correctness", error=LONG_ERROR, attainment=0.0,
        verdict="fallback-vendor",
        raw={"adoption": {"foreign_kernels": [
            {"name": "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNT_extremely_long_name_" * 2,
             "category": "vendor", "count": 1}], "aten_compute_ops": {"aten::mm": 1}}})
    summaries_rebuild(release)
    for weight_set in WeightSet.objects.filter(release=release):
        rescore_weight_set(weight_set)
    return extended(world, PhoneWorld, red_submission=red)


def horizontal_overflow(page: Page, path: str) -> int:
    """How many pixels wider than the window the page at `path` is (0: no sideways scroll)."""
    page.goto(path)
    return int(page.evaluate("document.documentElement.scrollWidth")) - PHONE["width"]


def test_no_main_page_scrolls_sideways_on_a_phone(page: Page, world: PhoneWorld) -> None:
    page.set_viewport_size(PHONE)
    pk, red = world.release.pk, world.red_submission.pk
    public = ["/", f"/releases/{pk}/", f"/releases/{pk}/rms_norm/", f"/boards/{pk}/H200/",
              f"/boards/{pk}/H200/?all=1", f"/boards/{pk}/H200/operators/rms_norm/",
              f"/boards/{pk}/H200/analysis/", f"/boards/{pk}/H200/changes/", "/accounts/login/",
              "/api/docs/", "/boards/", "/releases/", "/docs/", "/docs/cli/", "/docs/teams/",
              "/docs/developers/"]
    team = ["/team/", "/submit/", f"/submissions/{red}/"]
    admin = ["/team/", "/submit/", f"/submissions/{red}/", "/staff/quarantine/",
             f"/staff/releases/{pk}/weights/"]
    wide = {path: horizontal_overflow(page, path) for path in public}
    sign_in(page, "ruby", PASSWORD)
    wide |= {f"{path} (team)": horizontal_overflow(page, path) for path in team}
    page.context.clear_cookies()
    sign_in(page, "root", PASSWORD)
    wide |= {f"{path} (admin)": horizontal_overflow(page, path) for path in admin}
    overflowing = {path: px for path, px in wide.items() if px > 0}
    assert not overflowing, f"pixels wider than a {PHONE['width']} px window: {overflowing}"


def test_a_failed_shapes_row_stays_short_on_a_phone(page: Page, world: PhoneWorld) -> None:
    """Its long message gets a readable width in a table that scrolls in its own box, not a
    column one word wide and a row a screen tall (it was about 470 px)."""
    page.set_viewport_size(PHONE)
    sign_in(page, "ruby", PASSWORD)
    page.goto(f"/submissions/{world.red_submission.pk}/")
    failed = page.locator("table.shape-results tr", has=page.locator(".badge.failed")).first
    box = failed.bounding_box()
    assert box is not None and box["height"] < 200, box
    assert int(page.evaluate("document.documentElement.scrollWidth")) <= PHONE["width"]
