"""A team in the browser: sign in, upload a file and an archive, watch them being scored live
by a real Celery worker (CPU mode: the fixture release's dev shapes in Triton's interpreter),
read the submission page with its charts, and see why a bad upload was rejected."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from django.test import override_settings
from playwright.sync_api import Page, expect

from leaderboard.services import weight_set_from_release
from submissions.models import EvaluationJob, Submission
from tests.browser.conftest import (
    mark_document,
    same_document,
    screenshot,
    sign_in,
)
from tests.factories import TeamFactory, member_of
from tests.paths import SAMPLE_CANDIDATES
from tests.worker import pipeline_workers
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery"  # tests.factories.UserFactory's
SCORING_SECONDS = 240_000  # ms: generous for a shared CPU; the wait ends as soon as it is scored


def upload(page: Page, path: Path, *, operator: str = "", agent: str = "",
           tokens: str = "") -> None:
    page.goto("/submit/")
    page.get_by_label("Release").select_option(label="atrex-fixture v1 (newest)")
    page.get_by_label("Operator").select_option(operator)
    page.get_by_label("File").set_input_files(str(path))
    page.get_by_label("Agent").fill(agent)
    page.get_by_label("Output tokens").fill(tokens)
    page.get_by_role("button", name="Submit").click()


def watch_until_scored(page: Page) -> None:
    """On a submission page just opened: live states first, then "scored", same document."""
    status = page.locator("#submission-status")
    assert status.inner_text() in ("queued", "running")  # the worker takes seconds per shape
    mark_document(page)
    expect(status).to_have_text("scored", timeout=SCORING_SECONDS)
    assert same_document(page), "the page reloaded instead of updating in place"
    assert page.locator("#progress[hx-trigger]").count() == 0  # finished: polling stopped


def native_triton_archive(tmp_path: Path, operators: list[str]) -> Path:
    archive = tmp_path / "kernels.zip"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name in operators:
            zf.writestr(f"{name}.py", (SAMPLE_CANDIDATES / name / "triton_native.py").read_text())
    archive.write_bytes(buffer.getvalue())
    return archive


@override_settings(ATREX_SHAPE_FILTER="dev-*")
def test_a_team_uploads_watches_scoring_live_and_reads_its_results(
        page: Page, tmp_path: Path) -> None:
    release = import_fixture_release()
    weight_set_from_release(release)
    team = TeamFactory(name="Teal")
    member_of(team, "alice")

    page.goto("/accounts/login/")
    screenshot(page, "sign-in")
    sign_in(page, "alice", PASSWORD)
    expect(page.locator("header")).to_contain_text("Sign out alice")

    page.goto("/submit/")
    screenshot(page, "upload")
    with pipeline_workers(tmp_path):
        # One file; it is not named rms_norm.py, so the form's operator field says what it is.
        upload(page, SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py", operator="rms_norm",
               agent="browser-agent", tokens="4321")
        page.wait_for_url("**/submissions/*/")
        single = Submission.objects.get(team=team)
        assert page.url.endswith(f"/submissions/{single.pk}/")
        watch_until_scored(page)

        # An archive of <operator>.py files: one job per operator.
        archive = native_triton_archive(tmp_path, ["silu_and_mul", "fused_add_rms_norm"])
        upload(page, archive)
        page.wait_for_url("**/submissions/*/")
        screenshot(page, "submission-live")
        watch_until_scored(page)
    both = Submission.objects.filter(team=team).exclude(pk=single.pk).get()
    jobs = EvaluationJob.objects.filter(candidate__submission=both)
    assert sorted(j.candidate.operator.name for j in jobs) == ["fused_add_rms_norm", "silu_and_mul"]
    assert all(j.status == "scored" and j.shapes_done == j.shapes_total > 0 for j in jobs)
    for operator in ("fused_add_rms_norm", "silu_and_mul"):
        expect(page.locator("h2", has_text=operator)).to_contain_text("scored")
    # Triton's interpreter ran it: what it recorded as native is shown unverified
    dev_rows = page.locator("table").filter(has_text="dev-")
    expect(dev_rows.locator(".badge.unverified-cpu")).not_to_have_count(0)
    expect(dev_rows.locator(".badge.native")).to_have_count(0)

    # The single file's page, reopened: scores under the active weights and both charts drawn.
    page.goto(f"/submissions/{single.pk}/")
    expect(page.locator("#submission-status")).to_have_text("scored")
    expect(page.locator("#scores")).to_be_visible()
    expect(page.get_by_text("4321 output tokens")).to_be_visible()
    expect(page.locator("#charts[data-rendered=yes]")).to_have_count(1)
    # CPU mode measures no time: nothing on the roofline, and the page says why.
    expect(page.locator("#charts-note")).to_contain_text("No shape has a measured time yet")
    # no empty axes: neither a roofline with no point nor bars of "not timed"
    expect(page.locator("#roofline-chart")).to_be_hidden()
    expect(page.locator("#operator-chart")).to_be_hidden()


def test_a_rejected_upload_shows_its_message_and_stores_nothing(page: Page, tmp_path: Path) -> None:
    import_fixture_release()
    member_of(TeamFactory(name="Teal"), "alice")
    sign_in(page, "alice", PASSWORD)
    stray = tmp_path / "layer_norm.py"
    stray.write_text((SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_text())

    upload(page, stray, agent="my-agent", tokens="77")
    error = page.locator("#upload-error")
    expect(error).to_contain_text("layer_norm.py: no operator named 'layer_norm' in this release")
    expect(error).to_contain_text("rms_norm")  # the message lists the operators there are
    assert page.url.endswith("/submit/")
    # What was entered is still there, the release too; only the file is asked for again.
    expect(page.get_by_label("Agent")).to_have_value("my-agent")
    expect(page.get_by_label("Output tokens")).to_have_value("77")
    expect(page.get_by_label("Release").locator("option:checked")).to_have_text(
        "atrex-fixture v1 (newest)")
    # the refusal is also shown at the field it is about, which the top message links to
    expect(page.locator("#error-operator")).to_contain_text("no operator named")
    expect(page.get_by_label("Operator")).to_have_attribute("aria-describedby", "error-operator")
    expect(error.get_by_role("link", name="Go to the field.")).to_have_attribute(
        "href", "#field-operator")
    screenshot(page, "upload-rejected")
    assert not Submission.objects.exists()
