"""Boards in the browser: sorting and filtering swap the table in place (htmx), an admin's new
weights reorder the board, and the admin pages (weights, quarantine) and a submission's charts
render. Scores come from stored shape results, as after real evaluations on a GPU."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from leaderboard.models import WeightSet
from leaderboard.services import weight_set_activate, weight_set_create, weight_set_from_release
from submissions.models import EvaluationJob, ShapeResult
from tests.browser.conftest import (
    canvas_painted_pixels,
    mark_document,
    same_document,
    screenshot,
    sign_in,
)
from tests.builders import scored_submission
from tests.factories import UserFactory
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def boards() -> dict[str, Any]:
    """Three ranked teams and one quarantined; rms_norm-only weights active, gemm-only ready."""
    release = import_fixture_release()
    weight_set_from_release(release)
    submissions = {
        "Red": scored_submission(release, "Red", {"rms_norm": 0.8, "gemm_fp16": 0.2}),
        "Green": scored_submission(release, "Green", {"rms_norm": 0.5, "gemm_fp16": 0.9}),
        "Blue": scored_submission(release, "Blue", {"rms_norm": 0.2, "gemm_fp16": 0.6}),
        "Violet": scored_submission(release, "Violet", {"rms_norm": 0.7}),
    }
    for job in EvaluationJob.objects.all():  # what a finished evaluation leaves
        shapes = job.results.count()
        EvaluationJob.objects.filter(pk=job.pk).update(shapes_total=shapes, shapes_done=shapes)
    faster_than_light = ShapeResult.objects.filter(  # a scored shape: dev-* ones do not count
        job__candidate__submission=submissions["Violet"]).exclude(
        shape__shape_id__startswith="dev-").order_by("pk").first()
    assert faster_than_light is not None
    ShapeResult.objects.filter(pk=faster_than_light.pk).update(
        suspicious=True, attainment=1.4, median_s=2e-6, sol_s=2.8e-6, samples=400,
        launch_method="graph", dsl_ratio=1.0,
        raw={"adoption": {"dsl_kernels": ["_rms_norm_kernel"], "foreign_kernels": []}})
    norm_only = weight_set_create(release=release, weights={"rms_norm": 1}, source="manual",
                                  note="rms_norm only")
    weight_set_activate(weight_set=norm_only, actor=None)
    gemm_only = weight_set_create(release=release, weights={"gemm_fp16": 1}, source="manual",
                                  note="gemm_fp16 only")
    UserFactory(username="root", is_staff=True, is_superuser=True)
    return {"release": release, "submissions": submissions, "gemm_only": gemm_only}


def board_teams(page: Page) -> list[str]:
    """The team column of the board's submission rows, top to bottom (baselines left out)."""
    return page.locator("#board tr:not(.baseline) td:nth-child(2)").all_inner_texts()


def test_sorting_and_filtering_a_board_swap_it_in_place(page: Page, boards: dict[str, Any]) -> None:
    release = boards["release"]
    page.goto(f"/boards/{release.pk}/H200/")
    assert board_teams(page) == ["Red", "Green", "Blue"]  # by S_agg under rms_norm-only weights
    mark_document(page)

    page.locator('#board th[data-column="unweighted_mean"] a').click()
    expect(page).to_have_url(f"{page.url.split('?')[0]}?&sort=unweighted_mean")
    expect(page.locator('#board th[data-column="unweighted_mean"]')).to_contain_text("▾")
    assert board_teams(page) == ["Green", "Red", "Blue"]
    screenshot(page, "board")

    page.locator("#board-filters").get_by_role("link", name="all submissions").click()
    expect(page.locator("#board tr", has_text="Violet")).to_contain_text("suspicious")
    assert "all=1" in page.url
    assert sorted(board_teams(page)) == ["Blue", "Green", "Red", "Violet"]
    page.locator("#board-filters").get_by_role("link", name="best per team").click()
    expect(page.locator("#board tr", has_text="Violet")).to_have_count(0)

    page.locator("nav.boards").get_by_role("link", name="Memory-bound shapes").click()
    expect(page.locator("h1")).to_contain_text("Memory-bound shapes")
    assert "/memory/" in page.url
    assert same_document(page), "sorting or filtering reloaded the page"

    page.goto(f"/boards/{release.pk}/H200/operators/gemm_fp16/")
    expect(page.locator("table tr").nth(1)).to_contain_text("Green")
    screenshot(page, "operator-board")


def test_an_admin_activates_new_weights_and_the_board_reorders(
        page: Page, boards: dict[str, Any]) -> None:
    release, gemm_only = boards["release"], boards["gemm_only"]
    sign_in(page, "root", "correct horse battery", next_path=f"/staff/releases/{release.pk}/weights/")
    row = page.locator("tr", has=page.get_by_text(f"v{gemm_only.version}", exact=True))
    expect(row).to_contain_text("gemm_fp16 only")
    screenshot(page, "weights")
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    row.get_by_role("button", name="Activate").click()  # a second look, declined: nothing posts
    page.wait_for_timeout(300)
    assert asked and asked[0].startswith(f"Activate weights v{gemm_only.version}?")
    assert not WeightSet.objects.get(pk=gemm_only.pk).active
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Activate").click()
    expect(row).to_contain_text("active")
    expect(row.get_by_role("button")).to_have_count(0)
    assert WeightSet.objects.get(release=release, active=True) == gemm_only

    page.goto(f"/boards/{release.pk}/H200/")
    assert board_teams(page) == ["Green", "Blue", "Red"]  # by S_agg under gemm_fp16-only weights
    expect(page.get_by_text(f"showing v{gemm_only.version}")).to_be_visible()

    page.goto("/staff/quarantine/")
    expect(page.locator("#quarantine tr", has_text="Violet")).to_contain_text(
        "attainment 1.40 > 1: faster than the hardware's speed of light")
    screenshot(page, "quarantine")

    # A submission's page as the admin sees it: per-shape results and both charts drawn.
    green = boards["submissions"]["Green"]
    page.goto(f"/submissions/{green.pk}/")
    expect(page.locator("#charts[data-rendered=yes]")).to_have_count(1)
    points = page.evaluate("Chart.getChart(document.getElementById('roofline-chart'))"
                           ".data.datasets[0].data.map(p => p.y)")
    shapes = ShapeResult.objects.filter(job__candidate__submission=green).count()
    assert len(points) == shapes and sorted(set(points)) == [0.5, 0.9]
    bars = page.evaluate("Chart.getChart(document.getElementById('operator-chart'))"
                         ".data.datasets[0].data")
    assert sorted(b for b in bars if b) == [0.5, 0.9]
    for canvas in ("#roofline-chart", "#operator-chart"):
        assert canvas_painted_pixels(page, canvas) > 0, f"{canvas} is blank"
    screenshot(page, "submission")


def test_a_board_shows_three_dsls_side_by_side_filterable_with_their_rates(page: Page) -> None:
    release = import_fixture_release()
    weight_set_from_release(release)
    scored_submission(release, "Red", {"rms_norm": 0.8, "gemm_fp16": 0.2})
    scored_submission(release, "Green", {"rms_norm": 0.5, "gemm_fp16": 0.9}, dsl="cute")
    scored_submission(release, "Blue", {"rms_norm": 0.6, "gemm_fp16": 0.6}, dsl="gluon",
                      verdict="mixed")  # correct, but not in the DSL it declared
    both = weight_set_create(release=release, weights={"rms_norm": 1, "gemm_fp16": 1},
                             source="manual")
    weight_set_activate(weight_set=both, actor=None)
    page.goto(f"/boards/{release.pk}/H200/")
    dsl_cells = page.locator("#board tr:not(.baseline) td:nth-child(4)").all_inner_texts()
    assert dict(zip(board_teams(page), dsl_cells, strict=True)) == {
        "Green": "cute", "Red": "triton", "Blue": "gluon"}
    rates = page.locator("#dsl-rates-table tr[data-dsl]")
    expect(rates).to_have_count(3)
    expect(page.locator('#dsl-rates-table tr[data-dsl="gluon"]')).to_contain_text("1.000")
    expect(page.locator('#dsl-rates-table tr[data-dsl="gluon"] td').nth(4)).to_contain_text(
        "0.000")  # correct everywhere, native nowhere
    expect(page.locator('#dsl-rates-table tr[data-dsl="gluon"] .bar.correct')).to_be_visible()
    screenshot(page, "board-dsls")
    page.locator("#dsl-filter").get_by_role("link", name="CuTe DSL").click()
    expect(page.locator("#dsl-filter strong")).to_have_text("CuTe DSL")
    assert board_teams(page) == ["Green"] and "dsl=cute" in page.url
    page.locator("#dsl-filter").get_by_role("link", name="every DSL").click()
    expect(page.locator("#board tr:not(.baseline)")).to_have_count(4)  # header + 3 teams


def test_a_first_visit_sees_the_recorded_h200_results_in_three_dsls(page: Page) -> None:
    """The embedded default's fixture board, as setup_demo leaves it: the sample candidates'
    results recorded on an H200 (leaderboard/demo.py), one team per DSL and the shortcuts."""
    import io

    from django.core.management import call_command

    from evaluation.catalog.models import Release

    call_command("setup_demo", stdout=io.StringIO())
    release = Release.objects.get(name="atrex-fixture")
    page.goto(f"/boards/{release.pk}/H200/")
    dsl_cells = page.locator("#board tr:not(.baseline) td:nth-child(4)").all_inner_texts()
    rows = dict(zip(board_teams(page), dsl_cells, strict=True))
    assert {team: rows[team] for team in ("Triton samples", "Gluon samples",
                                          "CuTe DSL samples")} == {
        "Triton samples": "triton", "Gluon samples": "gluon", "CuTe DSL samples": "cute"}
    expect(page.locator("#dsl-rates-table tr[data-dsl]")).to_have_count(3)
    # CuTe DSL: five files correct, three of them native (a torch.matmul and a Triton file
    # not): 5 of their 8 scored-tier shapes (gemm_fp16's files one each)
    expect(page.locator('#dsl-rates-table tr[data-dsl="cute"]')).to_contain_text("1.000")
    expect(page.locator('#dsl-rates-table tr[data-dsl="cute"] td').nth(4)).to_contain_text(
        "0.625")
    screenshot(page, "board-recorded-dsls")
    page.locator("#dsl-filter").get_by_role("link", name="Gluon").click()
    expect(page.locator("#dsl-filter strong")).to_have_text("Gluon")
    assert sorted(board_teams(page)) == ["Gluon samples", "Shortcut samples"]
