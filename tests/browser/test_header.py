"""The header on a desktop and on a phone: one line each; every link, Boards among them,
reachable (on a phone behind the Menu button)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from evaluation.catalog.models import HardwareProfile, Release
from leaderboard.services import weight_set_from_release
from submissions.services import submission_create
from tests.browser.conftest import sign_in
from tests.factories import TeamFactory, UserFactory, member_of
from tests.paths import SAMPLE_CANDIDATES
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery"  # tests.factories.UserFactory's
LINKS = ["Problems", "Boards", "Docs", "Team", "Submit", "API", "Quarantine"]


def release_submitted_to() -> Release:
    """The fixture release with weights and one team's queued submission on H200."""
    release = import_fixture_release()
    weight_set_from_release(release)
    submission_create(team=TeamFactory(name="Blue"), user=None, release=release,
                      hardware=HardwareProfile.objects.get(name="H200"), filename="rms_norm.py",
                      data=(SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes())
    return release


def header_height(page: Page) -> float:
    return float(page.eval_on_selector("header", "h => h.getBoundingClientRect().height"))


def test_the_header_is_one_line_with_every_link_at_1024_px(page: Page) -> None:
    release = release_submitted_to()
    member_of(TeamFactory(name="Red"), "root")
    UserFactory._meta.model.objects.filter(username="root").update(is_staff=True)
    page.set_viewport_size({"width": 1024, "height": 800})
    sign_in(page, "root", PASSWORD)  # the longest header: a staff member of a team
    nav = page.locator("#site-nav")
    for name in LINKS:
        assert nav.get_by_role("link", name=name, exact=True).is_visible(), name
    assert not page.locator("label.menu-button").is_visible()
    assert header_height(page) < 60  # one line of links, not two
    nav.get_by_role("link", name="Boards", exact=True).click()
    page.wait_for_url("**/boards/")  # the index of every release's boards
    page.get_by_role("link", name="atrex-fixture v1").first.wait_for()
    page.goto(f"/boards/{release.pk}/H200/")
    assert page.locator("h1").inner_text().startswith("atrex-fixture")


def test_on_a_phone_the_links_fold_behind_a_menu_button(page: Page) -> None:
    release = release_submitted_to()
    member_of(TeamFactory(name="Red"), "ruby")
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, "ruby", PASSWORD)
    closed = header_height(page)
    assert closed < 60  # brand and the Menu button on one line
    boards = page.locator("#site-nav").get_by_role("link", name="Boards", exact=True)
    assert not boards.is_visible()
    page.locator("label.menu-button").click()
    assert boards.is_visible()
    assert page.locator("#site-nav").get_by_role("button", name="Sign out ruby").is_visible()
    assert header_height(page) > closed
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390  # the opened menu does not widen the page
    boards.click()
    page.wait_for_url("**/boards/")
    assert page.locator(f"#boards-index tr[data-release='{release.pk}']").is_visible()
