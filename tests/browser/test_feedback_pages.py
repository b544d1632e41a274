"""What a team needs to iterate, in the browser: a shape's profile opened on the submission
page, share links turned on and a submission's public page opened without signing in (then
revoked), a webhook set on the team page, and a check chosen on the upload form."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from leaderboard.services import weight_set_from_release
from submissions.models import Submission
from tests.browser.conftest import VIEWPORT, screenshot, sign_in
from tests.factories import TeamFactory, member_of
from tests.paths import FIXTURE_RELEASE, SAMPLE_CANDIDATES
from tests.reports import GEMM_SHAPE, RMS_SHAPE, gpu_shape, gpu_submission, native
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery"  # tests.factories.UserFactory's


def measured(operator: str, attainments: list[float], kernels: list[tuple[str, str, int, float]],
             ) -> list[dict[str, Any]]:
    """Every scored-tier shape of `operator`, timed at SOL / attainment (the fixture's H200
    SOL times), each forward's kernels sharing its time as `kernels` says (µs scaled)."""
    roofline = json.loads((FIXTURE_RELEASE / "data" / operator / "roofline.json").read_text())
    ids = [shape_id for shape_id in roofline["shapes"] if not shape_id.startswith("dev-")]
    shapes = []
    for shape_id, a in zip(ids, attainments * len(ids), strict=False):
        median = roofline["shapes"][shape_id]["SOL_time_ms"]["H200"] * 1e-3 / a
        total = sum(us for *_, us in kernels)
        shapes.append(gpu_shape(shape_id, median_s=median, kernels=[
            (n, c, k, us / total * median * 1e6) for n, c, k, us in kernels],
            verdict="native" if all(c == "dsl" for _, c, _, _ in kernels) else "mixed"))
    return shapes


@pytest.fixture
def profiled() -> dict[str, Any]:
    """Teal's rms_norm and gemm_fp16 as a GPU worker reported them, every scored shape."""
    team = TeamFactory(name="Teal")
    member_of(team, "alice")
    submission = gpu_submission(team, {"rms_norm": native("rms_norm"),
                                       "gemm_fp16": native("gemm_fp16")}, {
        "rms_norm": [
            gpu_shape(RMS_SHAPE, median_s=20e-6, verdict="mixed", kernels=[
                ("_rms_norm_kernel", "dsl", 1, 15.0), ("Memset (Device)", "torch", 1, 5.0)]),
            *[shape for shape in measured("rms_norm", [0.05, 0.4, 0.62, 0.7], [
                ("_rms_norm_kernel", "dsl", 1, 1.0)]) if shape["shape_id"] != RMS_SHAPE]],
        "gemm_fp16": [
            gpu_shape(GEMM_SHAPE, median_s=200e-6, kernels=[
                ("_matmul_kernel", "dsl", 1, 180.0), ("_cast_kernel", "dsl", 2, 20.0)]),
            *[shape for shape in measured("gemm_fp16", [0.55, 0.48, 0.66], [
                ("_matmul_kernel", "dsl", 1, 9.0), ("_cast_kernel", "dsl", 2, 1.0)])
              if shape["shape_id"] != GEMM_SHAPE]]})
    Submission.objects.filter(pk=submission.pk).update(agent="claude-code", model_name="opus")
    return {"team": team, "submission": submission}


def test_a_team_opens_a_shapes_profile_shares_the_submission_and_revokes_the_link(
        page: Page, profiled: dict[str, Any]) -> None:
    submission = profiled["submission"]
    sign_in(page, "alice", PASSWORD)
    page.goto(f"/submissions/{submission.pk}/")
    section = page.locator(f'details.profile[data-shape="{RMS_SHAPE}"]')
    kernels = section.locator("table.kernels")
    expect(kernels).to_be_hidden()  # closed until opened
    section.locator("summary").click()
    expect(kernels).to_be_visible()
    expect(kernels.locator("tr").nth(1)).to_contain_text("_rms_norm_kernel")
    expect(kernels.locator("tr").nth(1)).to_contain_text("75.0%")
    expect(section.locator("dl.profile-facts")).to_contain_text("TB/s of 4.80 TB/s")
    gemm = page.locator(f'details.profile[data-shape="{GEMM_SHAPE}"]')
    gemm.locator("summary").click()
    expect(gemm).to_contain_text("at the fp16_tc peak")
    screenshot(page, "submission-profile")

    # Share links are opt-in: the team turns them on, then makes this submission's link.
    expect(page.locator("#share")).to_contain_text("off for your team")
    page.goto("/team/")
    page.get_by_role("button", name="Turn on").click()
    expect(page.locator("#share-links")).to_contain_text("on")
    page.get_by_label("Webhook URL").fill("https://93.184.216.34/atrex-hook")
    page.get_by_role("button", name="Save webhook").click()
    expect(page.locator("#webhook-secret")).to_contain_text("whsec_")
    screenshot(page, "team-settings")
    page.goto(f"/submissions/{submission.pk}/")
    page.get_by_role("button", name="Create a public link").click()
    link = page.locator("#share-url")
    expect(link).to_be_visible()
    url = link.get_attribute("href")
    assert url and "/shared/" in url

    browser = page.context.browser
    assert browser is not None
    anonymous = browser.new_context(viewport=VIEWPORT)
    try:
        public = anonymous.new_page()
        public.goto(url)
        expect(public.locator("#submission-status")).to_have_text("scored")
        expect(public.locator("#shared-note")).to_contain_text("source code stays with the team")
        expect(public.locator("table.shared-shapes", has_text=RMS_SHAPE)).to_contain_text(
            "20.00 µs")
        assert "triton.jit" not in public.content()
        expect(public.get_by_role("link", name="Sign in")).to_be_visible()  # not signed in
        screenshot(public, "shared-submission")

        page.get_by_role("button", name="Revoke link").click()
        expect(page.get_by_role("button", name="Create a public link")).to_be_visible()
        assert public.goto(url).status == 404  # type: ignore[union-attr]
    finally:
        anonymous.close()


def test_a_check_chosen_on_the_upload_form_is_labelled_on_its_page(page: Page) -> None:
    release = import_fixture_release()
    weight_set_from_release(release)
    member_of(TeamFactory(name="Olive"), "olga")
    sign_in(page, "olga", PASSWORD)
    page.goto("/submit/")
    page.get_by_label("Release").select_option(label="atrex-fixture v1 (newest)")
    page.get_by_label("File").set_input_files(str(SAMPLE_CANDIDATES / "rms_norm" /
                                                  "triton_native.py"))
    page.get_by_label("Operator").select_option("rms_norm")
    page.get_by_label("Check: evaluated the same way").check()
    screenshot(page, "upload-check")
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url("**/submissions/*/")
    expect(page.locator("#check-notice")).to_contain_text("never enters a board")
    expect(page.locator("#progress .badge.check")).to_have_text("check mode")
    assert Submission.objects.get().mode == "check"
