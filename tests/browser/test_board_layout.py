"""A board explains itself and fits the screen: human headers, a legend with the formulas, a
link to the public weights, no column hidden at 1024 or 1440 px, rows stacked at 390 px
(element geometry, not screenshots). The board is the embedded default's fixture board,
with the sample candidates' recorded H200 results (setup_demo)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from playwright.sync_api import Page, expect

from evaluation.catalog.models import Release
from tests.browser.conftest import screenshot

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def release() -> Release:
    call_command("setup_demo", stdout=io.StringIO())
    return Release.objects.get(name="atrex-fixture")


def overflow(page: Page, selector: str) -> list[str]:
    """The cells under `selector` whose right edge is past the window or whose own content is
    wider than their box (hidden behind a scroll or cut)."""
    return list(page.evaluate("""(selector) => {
        const width = document.documentElement.clientWidth;
        const bad = [];
        for (const el of document.querySelectorAll(selector)) {
            const box = el.getBoundingClientRect();
            if (box.width === 0) continue;  // hidden (the phone layout's header row)
            if (box.right > width + 0.5 || el.scrollWidth > el.clientWidth + 1)
                bad.push((el.dataset.column || el.dataset.label || el.tagName) + ' right=' +
                         Math.round(box.right) + ' of ' + width);
        }
        const holder = document.querySelector('#board-holder');
        if (holder && holder.scrollWidth > holder.clientWidth + 1)
            bad.push('board scrolls sideways: ' + holder.scrollWidth + ' > ' + holder.clientWidth);
        if (document.documentElement.scrollWidth > width + 1)
            bad.push('page scrolls sideways: ' + document.documentElement.scrollWidth);
        return bad;
    }""", selector))


@pytest.mark.parametrize("width", [1024, 1440])
def test_no_board_column_is_hidden_on_a_laptop_screen(page: Page, release: Release,
                                                      width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/boards/{release.pk}/H200/")
    headers = page.locator("#board th[data-column]")
    expect(headers).to_have_count(17)
    assert overflow(page, "#board th, #board td") == []
    # the badges column, the last, is on screen beside the first
    assert page.locator('#board th[data-column="badges"]').bounding_box()["x"] < width  # type: ignore[index]
    screenshot(page, f"board-{width}")


def test_on_a_phone_each_row_is_a_card_with_its_labels(page: Page, release: Release) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"/boards/{release.pk}/H200/")
    assert overflow(page, "#board td, #board-legend, #dsl-rates-table") == []
    label = page.locator('#board td[data-label="S_agg"]').first
    expect(label).to_be_visible()
    assert "S_agg" in page.evaluate(
        "el => getComputedStyle(el, '::before').content", label.element_handle())
    screenshot(page, "board-390")


def test_the_board_says_what_its_numbers_mean_and_links_the_weights(page: Page,
                                                                   release: Release) -> None:
    page.goto(f"/boards/{release.pk}/H200/")
    expect(page.locator('#board th[data-column="unweighted_mean"]')).to_contain_text(
        "Mean S_op")
    expect(page.locator('#board th[data-column="correctness_rate"]')).to_have_text(
        "Correct shapes")
    legend = page.locator("#board-legend")
    legend.locator("summary").click()  # folded under the table: one line until asked
    for term in ("attainment a", "S_op", "S_agg", "Memory-bound, Compute-bound", "not timed"):
        expect(legend.locator("dt", has_text=term).first).to_be_visible()
    expect(legend).to_contain_text("SOL / T")
    page.locator("#weights-link").click()
    expect(page.locator("h1")).to_contain_text("Importance weights")
    row = page.locator('#weights-table tr[data-operator="causal_attention"]')
    expect(row).to_contain_text("0.3500")  # the fixture's weight, as normalised
    screenshot(page, "public-weights")
    page.goto("/docs/")
    page.locator("#docs-nav").get_by_role("link", name="teams").click()
    expect(page.locator("#docs-body h1")).to_contain_text("For teams")
