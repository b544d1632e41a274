"""Rate limits: sign-in attempts, token guessing and uploads answer 429 past their limit."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from portal.accounts.models import token_create
from tests.factories import TeamFactory, UserFactory

pytestmark = pytest.mark.django_db
LIMITS = {"login": (3, 60), "token": (4, 60), "upload": (2, 60)}


@override_settings(ATREX_RATE_LIMITS=LIMITS)
def test_sign_in_attempts_are_limited_per_address() -> None:
    UserFactory(username="ruby")
    client = Client(REMOTE_ADDR="10.0.0.7")
    codes = [client.post("/accounts/login/", {"username": "ruby", "password": "guess"})
             .status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    last = client.post("/accounts/login/", {"username": "ruby", "password": "guess"})
    assert last.status_code == 429 and int(last["Retry-After"]) > 0
    # Another address is not held back, and reading the page is never limited.
    assert Client(REMOTE_ADDR="10.0.0.8").post(
        "/accounts/login/", {"username": "ruby", "password": "correct horse battery"}
    ).status_code == 302
    assert client.get("/accounts/login/").status_code == 200


@override_settings(ATREX_RATE_LIMITS=LIMITS)
def test_guessing_api_tokens_is_slowed_down() -> None:
    client = Client(REMOTE_ADDR="10.0.0.9")
    codes = [client.get("/api/quota/", HTTP_AUTHORIZATION=f"Bearer atx_guess{i}").status_code
             for i in range(5)]
    assert codes == [401, 401, 401, 401, 429]


@override_settings(ATREX_RATE_LIMITS=LIMITS)
def test_uploads_are_limited_per_team_before_any_work() -> None:
    red = TeamFactory(name="Red")
    _, token = token_create(team=red, name="ci")
    client = Client()
    codes = [client.post("/api/submissions/", {"release": 999999, "hardware": "H200"},
                         HTTP_AUTHORIZATION=f"Bearer {token}").status_code for _ in range(3)]
    assert codes[:2] == [400, 400] and codes[2] == 429
    other = token_create(team=TeamFactory(name="Blue"), name="ci")[1]
    assert client.post("/api/submissions/", {}, HTTP_AUTHORIZATION=f"Bearer {other}"
                       ).status_code == 400


@override_settings(ATREX_RATE_LIMITS=LIMITS)
def test_a_window_is_not_cut_at_a_clock_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three sign-ins just before a whole minute and one just after are still four in one
    window: the window starts at the caller's first request, so Retry-After counts from it."""
    from portal import ratelimit

    rule = ratelimit.limit("login")
    now = [6_000_059.5]
    monkeypatch.setattr(ratelimit, "clock", lambda: now[0])
    assert [ratelimit.exceeded(rule, "10.0.0.5") for _ in range(3)] == [None, None, None]
    now[0] = 6_000_060.5  # a minute boundary passed; the window has 59 s left
    assert ratelimit.exceeded(rule, "10.0.0.5") == 59


@override_settings(ATREX_RATE_LIMITS={**LIMITS, "login": (10, 60)})
def test_admin_sign_in_attempts_are_limited_like_the_portals() -> None:
    UserFactory(username="root", is_staff=True, is_superuser=True)
    client = Client(REMOTE_ADDR="10.0.0.7")
    responses = [client.post("/admin/login/", {"username": "root", "password": "guess"})
                 for _ in range(12)]
    assert [r.status_code for r in responses] == [200] * 10 + [429, 429]
    assert int(responses[-1]["Retry-After"]) > 0
    # One budget per address across both sign-in pages: the portal's is spent too.
    assert client.post("/accounts/login/", {"username": "root", "password": "guess"}
                       ).status_code == 429
    assert Client(REMOTE_ADDR="10.0.0.8").post(
        "/admin/login/", {"username": "root", "password": "correct horse battery"}
    ).status_code == 302
