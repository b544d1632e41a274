"""A visitor finds how to get an account, signs up with a team of their own, invites a
teammate who joins with the link, and submits a kernel: in a real browser."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from portal.accounts.models import Team
from submissions.models import Submission
from tests.browser.conftest import screenshot
from tests.paths import SAMPLE_CANDIDATES
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_visitor_signs_up_invites_a_teammate_and_submits(page: Page, settings: Any,
                                                           live_server: Any) -> None:
    settings.ATREX_SIGNUP = "open"
    import_fixture_release()
    page.goto("/accounts/login/")
    expect(page.locator("#how-to-get-an-account")).to_contain_text("make a team of your own")
    page.locator("#how-to-get-an-account").get_by_role("link", name="Sign up").click()
    page.get_by_label("Username").fill("nova")
    page.get_by_label("Password").fill("correct horse battery staple")
    page.get_by_label("New team's name").fill("Nova Kernels")
    screenshot(page, "signup")
    page.get_by_role("button", name="Sign up").click()
    expect(page.locator("h1")).to_have_text("Nova Kernels")

    page.get_by_role("button", name="Make an invite code").click()
    link = page.locator("#invites").get_by_role("link", name="sign-up link")
    expect(link).to_have_count(1)
    invite_url = link.get_attribute("href")
    assert invite_url is not None and "invite=join-" in invite_url

    browser = page.context.browser
    assert browser is not None
    other = browser.new_context(base_url=live_server.url)  # a second visitor, no cookies
    teammate = other.new_page()
    teammate.goto(invite_url)
    teammate.get_by_label("Username").fill("ivo")
    teammate.get_by_label("Password").fill("another horse battery staple")
    teammate.get_by_role("button", name="Sign up").click()
    expect(teammate.locator("h1")).to_have_text("Nova Kernels")
    other.close()
    assert set(Team.objects.get(name="Nova Kernels").members.values_list(
        "username", flat=True)) == {"nova", "ivo"}

    page.goto("/submit/")
    page.get_by_label("Operator").select_option("rms_norm")  # the file is not named after it
    page.locator("input[name=file]").set_input_files(
        str(SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py"))
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#submission-status")).to_be_visible()
    # no worker runs in this test: the job waits, and the page says where and for how long
    expect(page.locator(".queue-place")).to_contain_text("In the queue for H200: number 1")
    expect(page.locator(".queue-place")).to_contain_text("no estimate yet")
    screenshot(page, "signup-queued")
    assert Submission.objects.filter(team__name="Nova Kernels").count() == 1
    assert User.objects.get(username="nova").is_active
