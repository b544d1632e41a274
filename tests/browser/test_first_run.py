"""A visitor's first run of the embedded default (setup_demo as `make run` calls it): every
board, the operator boards and a submission's charts hold numbers recorded on an H200, each
page saying where they came from; a chart with nothing to draw says so instead of empty axes."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from playwright.sync_api import Page, expect

from evaluation.catalog.models import Release
from submissions.models import Submission
from tests.browser.conftest import canvas_painted_pixels, screenshot

pytestmark = pytest.mark.django_db(transaction=True)

NUMBER = re.compile(r"^\d+\.\d+$")


def numbers_in(page: Page, label: str, rows: str) -> list[float]:
    """The numbers shown in the column labelled `label` of the board's `rows`."""
    texts = page.locator(f"#board {rows} td[data-label='{label}']").all_inner_texts()
    # a score's first line (the board's own score has its interval on a second)
    firsts = [t.strip().splitlines()[0] if t.strip() else "" for t in texts]
    return [float(t) for t in firsts if NUMBER.match(t)]


@pytest.fixture
def first_run() -> dict[str, Release]:
    call_command("setup_demo", stdout=io.StringIO())
    return {name: Release.objects.get(name=name) for name in ("atrex-starter", "atrex-fixture")}


def test_every_board_of_a_first_run_shows_recorded_numbers_and_where_they_come_from(
        page: Page, first_run: dict[str, Release]) -> None:
    fixture, starter = first_run["atrex-fixture"], first_run["atrex-starter"]
    for board, label in (("", "S_agg"), ("memory/", "Memory-bound"), ("prefill/", "Prefill"),
                         ("decode/", "Decode")):
        page.goto(f"/boards/{fixture.pk}/H200/{board}")
        expect(page.locator("#provenance")).to_contain_text("NVIDIA H200, 2026-12-02")
        scores = numbers_in(page, label, "tr:not(.baseline)")
        assert len(scores) == 4 and max(scores) > 0, (board, scores)
        if not board:
            screenshot(page, "first-run-fixture-board")
    for board, label in (("", "S_agg"), ("memory/", "Memory-bound"),
                         ("compute/", "Compute-bound"), ("prefill/", "Prefill"),
                         ("decode/", "Decode")):
        page.goto(f"/boards/{starter.pk}/H200/{board}")
        expect(page.locator("#provenance")).to_contain_text("NVIDIA H200, 2026-11-30")
        baselines = numbers_in(page, label, "tr.baseline")
        assert len(baselines) == 2 and min(baselines) > 0, (board, baselines)
        if not board:
            screenshot(page, "first-run-starter-board")

    page.goto(f"/boards/{starter.pk}/H200/operators/rms_norm/")
    expect(page.locator("#provenance")).to_be_visible()
    expect(page.locator("#operator-board tr.baseline")).to_have_count(2)
    expect(page.locator("#operator-board")).to_contain_text("torch.compile reference")
    expect(page.locator("body")).to_contain_text("– (no team yet)")
    page.goto(f"/boards/{fixture.pk}/H200/operators/rms_norm/")
    # each rank first, then the row's badges (recorded results carry no interval)
    expect(page.locator("#operator-board tr:not(.baseline) td:first-child")).to_have_text(
        [re.compile(rf"^{rank}(\s|$)") for rank in ("1", "2", "3", "4")])

    page.goto(f"/boards/{fixture.pk}/H200/changes/")
    expect(page.locator("h1")).to_contain_text("weights v1 → v2")
    expect(page.locator("#provenance")).to_be_visible()


def test_a_recorded_submission_draws_its_roofline_and_an_empty_analysis_says_why(
        page: Page, first_run: dict[str, Release]) -> None:
    from tests.browser.conftest import sign_in
    from tests.factories import UserFactory

    UserFactory(username="root", is_staff=True, is_superuser=True)
    sign_in(page, "root", "correct horse battery", next_path="/")
    gluon = Submission.objects.get(team__name="Gluon samples")
    page.goto(f"/submissions/{gluon.pk}/")
    expect(page.locator("#charts[data-rendered=yes]")).to_have_count(1)
    assert canvas_painted_pixels(page, "#roofline-chart") > 500
    assert canvas_painted_pixels(page, "#operator-chart") > 500
    page.goto(f"/boards/{first_run['atrex-fixture'].pk}/H200/analysis/")
    expect(page.locator("#analysis[data-rendered=yes]")).to_have_count(1)
    expect(page.locator("#analysis-note")).to_contain_text("nothing to draw")
    expect(page.locator("#analysis-chart")).to_be_hidden()
