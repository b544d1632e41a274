"""Actions that one more click cannot take back ask first: revoking a token and freezing a
board. Declining the dialog posts nothing; accepting it does what the button says."""

from __future__ import annotations

import pytest
from playwright.sync_api import Dialog, Page, expect

from leaderboard.models import BoardFreeze
from leaderboard.services import weight_set_from_release
from portal.accounts.models import ApiToken, invite_create
from tests.browser.conftest import sign_in
from tests.factories import TeamFactory, UserFactory, member_of
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery"  # tests.factories.UserFactory's


def answer_next_dialog(page: Page, accept: bool) -> list[str]:
    asked: list[str] = []

    def answer(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", answer)
    return asked


def test_revoking_a_token_asks_first(page: Page) -> None:
    member_of(TeamFactory(name="Red"), "ruby")
    sign_in(page, "ruby", PASSWORD)
    page.locator("input[name=token_name]").fill("ci-bot")
    page.get_by_role("button", name="Create token").click()
    revoke = page.get_by_role("button", name="Revoke", exact=True)
    expect(revoke).to_be_visible()

    asked = answer_next_dialog(page, accept=False)
    revoke.click()
    page.wait_for_timeout(300)
    assert asked and asked[0].startswith("Revoke the token ci-bot?")
    assert ApiToken.objects.get(name="ci-bot").revoked_at is None

    answer_next_dialog(page, accept=True)
    revoke.click()
    expect(page.locator("td", has_text="revoked")).to_be_visible()
    assert ApiToken.objects.get(name="ci-bot").revoked_at is not None


def test_freezing_a_board_asks_first(page: Page) -> None:
    release = import_fixture_release()
    weight_set_from_release(release)
    UserFactory(username="root", is_staff=True, is_superuser=True)
    sign_in(page, "root", PASSWORD, next_path=f"/boards/{release.pk}/H200/")

    asked = answer_next_dialog(page, accept=False)
    page.get_by_role("button", name="Freeze this board now").click()
    page.wait_for_timeout(300)
    assert asked and asked[0].startswith("Freeze this board now?")
    assert not BoardFreeze.objects.exists()

    answer_next_dialog(page, accept=True)
    page.get_by_role("button", name="Freeze this board now").click()
    expect(page.get_by_role("button", name="Unfreeze this board")).to_be_visible()
    assert BoardFreeze.objects.count() == 1


@pytest.mark.parametrize(("button", "question"), [
    ("Turn off (revokes every link)", "Turn share links off?"),
    ("New secret", "Make a new signing secret?"),
    ("Revoke", "Revoke this invite code?"),
])
def test_team_settings_that_cannot_be_taken_back_ask_first(page: Page, button: str,
                                                            question: str) -> None:
    team = TeamFactory(name="Red", share_links_enabled=True, webhook_url="https://example.org/h",
                       webhook_secret="whsec_old")
    member_of(team, "ruby")
    invite_create(team=team, created_by=None)
    sign_in(page, "ruby", PASSWORD)
    asked = answer_next_dialog(page, accept=False)
    page.locator("form").get_by_role("button", name=button, exact=True).first.click()
    page.wait_for_timeout(300)
    assert asked and asked[0].startswith(question)
    team.refresh_from_db()
    assert team.share_links_enabled and team.webhook_secret == "whsec_old"
    assert team.invites.get().revoked_at is None


def test_changing_the_fallback_policy_asks_first(page: Page) -> None:
    release = import_fixture_release()
    weight_set_from_release(release)
    UserFactory(username="root", is_staff=True, is_superuser=True)
    sign_in(page, "root", PASSWORD, next_path=f"/staff/releases/{release.pk}/weights/")
    asked = answer_next_dialog(page, accept=False)
    page.get_by_role("button", name="Let fallbacks score their attainment").click()
    page.wait_for_timeout(300)
    assert asked and asked[0].startswith("Let fallbacks")
    release.refresh_from_db()
    assert release.fallback_scores_zero
