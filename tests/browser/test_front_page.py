"""A newcomer's first minutes, in a real browser: the front page of a first run shows a board
with numbers and a chart; the compute-bound and decode boards hold rows (the fixture's teams,
the public Atrex-Bench's baseline); the boards index opens a board with data; a new team on a
CPU portal submits with the form's defaults and gets a result on its first try."""

from __future__ import annotations

import io
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from playwright.sync_api import Page, expect

from evaluation.catalog.importing import release_import
from evaluation.catalog.models import EvaluationWorker, Release
from leaderboard.services import weight_set_from_release
from submissions.models import Submission
from tests.browser.conftest import canvas_painted_pixels, screenshot
from tests.paths import REPO, SAMPLE_CANDIDATES
from tests.worker import pipeline_workers
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db(transaction=True)

NUMBER = re.compile(r"^\d+\.\d+$")
SCORING_MS = 240_000  # a shared CPU; the wait ends as soon as it is scored


def public_release() -> Path | None:
    """The public Atrex-Bench release: $ATREX_PUBLIC_RELEASE, or shared/atrex-bench beside
    the checkout (or beside its worktrees' folder)."""
    chosen = os.environ.get("ATREX_PUBLIC_RELEASE")
    places = [Path(chosen)] if chosen else [REPO.parent / "shared" / "atrex-bench",
                                            REPO.parents[1] / "shared" / "atrex-bench"]
    return next((p for p in places if (p / "data" / "operator_importance.json").is_file()), None)


def numbers_in(page: Page, label: str, rows: str) -> list[float]:
    """The numbers in the column labelled `label` of the board's `rows` (a cell's first line:
    the board's own score has its interval on a second)."""
    texts = page.locator(f"#board {rows} td[data-label='{label}']").all_inner_texts()
    firsts = [t.strip().splitlines()[0] if t.strip() else "" for t in texts]
    return [float(t) for t in firsts if NUMBER.match(t)]


def test_the_front_page_of_a_first_run_shows_a_board_with_numbers_and_a_chart(
        page: Page) -> None:
    call_command("setup_demo", stdout=io.StringIO())
    fixture = Release.objects.get(name="atrex-fixture")
    page.goto("/")
    expect(page.locator("#intro")).to_contain_text("really runs in its DSL")
    headline = page.locator(f"#headline-{fixture.pk}")
    expect(headline.locator("h2")).to_contain_text("atrex-fixture v1 on H200")
    scores = [t for t in headline.locator(".team-row td.num").all_inner_texts()
              if NUMBER.match(t.strip())]
    assert len(scores) >= 4 and max(float(s) for s in scores) > 0, scores
    chart = headline.locator("canvas.leaders-chart[data-rendered=yes]")
    expect(chart).to_have_count(1)
    assert canvas_painted_pixels(page, f"#headline-{fixture.pk} canvas.leaders-chart") > 500
    expect(page.locator("#start pre#cli-start")).to_contain_text("atrex submit")
    expect(page.locator("#activity li")).not_to_have_count(0)
    screenshot(page, "front-page")


def test_the_compute_bound_and_decode_boards_show_their_rows(page: Page) -> None:
    public = public_release()
    args = ["--public-release", str(public)] if public else []
    call_command("setup_demo", *args, stdout=io.StringIO())
    fixture = Release.objects.get(name="atrex-fixture")
    for board, label in (("compute/", "Compute-bound"), ("decode/", "Decode")):
        page.goto(f"/boards/{fixture.pk}/H200/{board}")
        teams = numbers_in(page, label, "tr:not(.baseline)")
        assert len(teams) == 4, (board, teams)  # the four recorded teams, each with a number
        expect(page.locator("#board-empty")).to_have_count(0)
        if board == "compute/":
            screenshot(page, "board-compute")
    if public is None:
        pytest.skip("the public Atrex-Bench release is not beside this checkout: only the "
                    "fixture's boards were checked")
    bench = Release.objects.get(name="atrex-bench")
    for board, label in (("compute/", "Compute-bound"), ("decode/", "Decode")):
        page.goto(f"/boards/{bench.pk}/H200/{board}")
        # the PyTorch reference's row (the recorded expert ladder's rows stand beside it)
        reference = "tr.baseline:has-text('PyTorch reference')"
        baseline = numbers_in(page, label, reference)
        assert len(baseline) == 1 and baseline[0] > 0, (board, baseline)
        expect(page.locator(f"#board {reference}")).to_have_count(1)


def test_the_boards_index_opens_a_board_with_data(page: Page) -> None:
    call_command("setup_demo", stdout=io.StringIO())
    fixture = Release.objects.get(name="atrex-fixture")
    page.goto("/")
    page.locator("header nav").get_by_role("link", name="Boards").click()
    expect(page.locator("h1")).to_have_text("Boards")
    row = page.locator(f"#boards-index tr[data-release='{fixture.pk}']")
    expect(row.locator("td[data-hardware=H200]")).to_contain_text("4 teams")
    expect(row.locator("td[data-hardware=H100]")).to_have_text("–")
    screenshot(page, "boards-index")
    row.get_by_role("link", name="Open: H200").click()
    page.wait_for_url(f"**/boards/{fixture.pk}/H200/")
    assert len(numbers_in(page, "S_agg", "tr:not(.baseline)")) == 4


def test_a_new_team_on_a_cpu_portal_submits_with_the_forms_defaults_and_gets_a_result(
        page: Page, settings: Any, tmp_path: Path) -> None:
    settings.ATREX_SIGNUP = "open"
    settings.ATREX_SHAPE_FILTER = "dev-*"  # a portal without GPUs: the dev tier
    release = import_fixture_release()
    weight_set_from_release(release)
    starter = release_import(path=REPO / "evaluation" / "releases" / "atrex-starter").release
    kernel = tmp_path / "rms_norm.py"  # named after its operator: the form's default reads it
    shutil.copy(SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py", kernel)
    with pipeline_workers(tmp_path):
        deadline = time.monotonic() + 60  # the worker's announcement, stored by the consumer
        while not EvaluationWorker.objects.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        page.goto("/accounts/signup/")
        page.get_by_label("Username").fill("nova")
        page.get_by_label("Password").fill("correct horse battery staple")
        page.get_by_label("New team's name").fill("Nova Kernels")
        page.get_by_role("button", name="Sign up").click()
        expect(page.locator("h1")).to_have_text("Nova Kernels")
        page.locator("header nav").get_by_role("link", name="Submit").click()
        expect(page.locator("#capability")).to_contain_text(
            "This portal has no GPU worker: it checks atrex-fixture and atrex-starter on the "
            "dev tier")
        expect(page.get_by_label("Release").locator("option:checked")).to_have_text(
            "atrex-fixture v1 (newest)")
        expect(page.locator("input[name=mode][value=ranked]")).to_have_count(0)
        # the operator list holds the chosen release's operators only
        groups = page.locator("#operator-choice optgroup:not([hidden])")
        expect(groups).to_have_count(1)
        assert groups.get_attribute("data-release") == str(release.pk)
        page.get_by_label("Release").select_option(str(starter.pk))
        assert page.locator("#operator-choice optgroup:not([hidden])").get_attribute(
            "data-release") == str(starter.pk)
        page.get_by_label("Release").select_option(str(release.pk))
        screenshot(page, "upload-cpu-portal")
        page.get_by_label("File").set_input_files(str(kernel))
        page.get_by_role("button", name="Submit").click()  # every other field as it came
        status = page.locator("#submission-status")
        expect(status).to_be_visible()
        expect(status).to_have_text("scored", timeout=SCORING_MS)
    expect(page.locator("#submission-summary")).to_contain_text("2 of 2 shapes correct")
    submission = Submission.objects.get(team__name="Nova Kernels")
    assert (submission.release, submission.hardware.name, submission.mode) == (
        release, "H200", Submission.Mode.CHECK)
