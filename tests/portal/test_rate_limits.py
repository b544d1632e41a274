"""Rate limits: sign-in attempts, token guessing and uploads answer 429 past their limit."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from portal.accounts.models import token_create
from portal.throttles import PortalThrottle
from submissions.models import Submission
from tests.factories import TeamFactory, UserFactory, member_of
from tests.paths import SAMPLE_CANDIDATES
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db
START = 6_000_059.5  # half a second before a whole minute
HONEST = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()


@pytest.fixture(autouse=True)
def _small_limits(rate_limits: Callable[..., None]) -> None:
    rate_limits(login=3, token=4, upload=2)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The throttles' clock (DRF's `timer`), at START until the test moves it; the cache's
    own expiry keeps real time, so nothing counted expires while the test runs."""
    now = [START]
    monkeypatch.setattr(PortalThrottle, "timer", staticmethod(lambda: now[0]))
    return now


def guess(client: Client, password: str = "guess", page: str = "/accounts/login/") -> Any:
    return client.post(page, {"username": "ruby", "password": password})


def test_sign_in_attempts_are_limited_per_address() -> None:
    UserFactory(username="ruby")
    client = Client(REMOTE_ADDR="10.0.0.7")
    assert [guess(client).status_code for _ in range(4)] == [200, 200, 200, 429]
    last = guess(client)
    assert last.status_code == 429 and int(last["Retry-After"]) > 0
    assert last.content.decode() == (
        f"Too many sign-in attempts; try again in {last['Retry-After']} s.\n")
    # Another address is not held back, and reading the page is never limited.
    assert guess(Client(REMOTE_ADDR="10.0.0.8"), "correct horse battery").status_code == 302
    assert client.get("/accounts/login/").status_code == 200


def test_the_window_slides_from_the_oldest_counted_attempt(clock: list[float]) -> None:
    """A whole minute passing resets nothing; Retry-After is when the oldest attempt counted
    leaves the last minute; a refused attempt is not counted."""
    client = Client(REMOTE_ADDR="10.0.0.5")

    def guess_at(seconds: float) -> Any:
        clock[0] = START + seconds
        return guess(client)

    assert [guess_at(s).status_code for s in (0, 20, 40)] == [200, 200, 200]
    refused = guess_at(41)  # a whole minute passed at 0.5 s
    assert refused.status_code == 429 and refused["Retry-After"] == "19"
    assert refused.content == b"Too many sign-in attempts; try again in 19 s.\n"
    # The attempt at 0 s has left; had the refused one at 41 s counted, three would remain.
    assert guess_at(60.5).status_code == 200
    assert guess_at(60.5)["Retry-After"] == "20"  # the attempt at 20 s leaves at 80 s


def test_a_lowered_limit_still_says_when_to_try_again(
        clock: list[float], rate_limits: Callable[..., None]) -> None:
    """More attempts counted than the new limit allows: DRF gives no wait; the full window
    is answered."""
    client = Client(REMOTE_ADDR="10.0.0.6")
    assert [guess(client).status_code for _ in range(3)] == [200, 200, 200]
    rate_limits(login=1)
    refused = guess(client)
    assert refused.status_code == 429 and refused["Retry-After"] == "60"


def test_guessing_api_tokens_is_slowed_down(clock: list[float]) -> None:
    red = TeamFactory(name="Red")
    _, token = token_create(team=red, name="ci")
    client = Client(REMOTE_ADDR="10.0.0.9")
    responses = [client.get("/api/quota/", HTTP_AUTHORIZATION=f"Bearer atx_guess{i}")
                 for i in range(5)]
    assert [r.status_code for r in responses] == [401, 401, 401, 401, 429]
    assert responses[-1]["Retry-After"] == "60"
    assert responses[-1].json() == {
        "detail": "Too many invalid tokens. Expected available in 60 seconds."}
    # Only failures are limited: the team's own token still works from that address.
    assert client.get("/api/quota/", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    assert Client(REMOTE_ADDR="10.0.0.10").get(
        "/api/quota/", HTTP_AUTHORIZATION="Bearer atx_guess").status_code == 401


def test_a_forged_forwarded_for_header_buys_no_fresh_budget() -> None:
    client = Client(REMOTE_ADDR="10.0.0.9")
    codes = [client.get("/api/quota/", HTTP_AUTHORIZATION="Bearer atx_guess",
                        HTTP_X_FORWARDED_FOR=f"203.0.113.{i}").status_code for i in range(5)]
    assert codes == [401, 401, 401, 401, 429]


def test_uploads_are_limited_per_team_before_any_work(clock: list[float]) -> None:
    release = import_fixture_release()
    red = TeamFactory(name="Red")
    _, token = token_create(team=red, name="ci")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    clock[0] = START + 30
    codes = [client.post("/api/submissions/", {"release": 999999, "hardware": "H200"}
                         ).status_code for _ in range(2)]
    assert codes == [400, 400]
    clock[0] = START + 45
    upload = io.BytesIO(HONEST)
    upload.name = "rms_norm.py"
    refused = client.post("/api/submissions/", {"file": upload, "release": release.pk,
                                                "hardware": "H200"})
    assert refused.status_code == 429 and refused["Retry-After"] == "45"
    assert refused.json() == {"detail": "Too many uploads. Expected available in 45 seconds."}
    assert not Submission.objects.filter(team=red).exists()
    # Listing is not uploading; another team has its own budget.
    assert client.get("/api/submissions/").status_code == 200
    other = token_create(team=TeamFactory(name="Blue"), name="ci")[1]
    assert client.post("/api/submissions/", {}, HTTP_AUTHORIZATION=f"Bearer {other}"
                       ).status_code == 400


def test_the_upload_page_spends_the_teams_api_budget() -> None:
    red = TeamFactory(name="Red")
    _, token = token_create(team=red, name="ci")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert [api.post("/api/submissions/", {}).status_code for _ in range(2)] == [400, 400]
    page = Client()
    page.force_login(member_of(red, "ruby"))
    refused = page.post("/submit/", {"release": 999999, "hardware": "H200"})
    assert refused.status_code == 429
    assert refused.content.decode() == (
        f"Too many uploads; try again in {refused['Retry-After']} s.\n")
    assert page.get("/submit/").status_code == 200
    blue = Client()
    blue.force_login(member_of(TeamFactory(name="Blue"), "bob"))
    assert blue.post("/submit/", {"release": 999999, "hardware": "H200"}).status_code == 400


def test_admin_sign_in_attempts_are_limited_like_the_portals(
        rate_limits: Callable[..., None]) -> None:
    rate_limits(login=10)
    UserFactory(username="ruby", is_staff=True, is_superuser=True)
    client = Client(REMOTE_ADDR="10.0.0.7")
    responses = [guess(client, page="/admin/login/") for _ in range(12)]
    assert [r.status_code for r in responses] == [200] * 10 + [429, 429]
    assert int(responses[-1]["Retry-After"]) > 0
    # One budget per address across both sign-in pages: the portal's is spent too.
    assert guess(client).status_code == 429
    assert guess(Client(REMOTE_ADDR="10.0.0.8"), "correct horse battery",
                 page="/admin/login/").status_code == 302
