"""Public links to a submission's summary: opt-in per team, an unguessable token, revocable;
the summary shows the outcome, scores and per-shape results, never the source or anything
hidden."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from portal.accounts.models import Team
from portal.audit.models import AuditEntry
from submissions.models import Submission
from submissions.sharing import TOKEN_BYTES
from tests.factories import TeamFactory, UserFactory, member_of
from tests.reports import GEMM_SHAPE, RMS_SHAPE, gpu_shape, gpu_submission, native
from tests.world import signed_in

pytestmark = pytest.mark.django_db

SECRET_LINE = "SECRET_SOURCE_MARKER = 42\n"


@pytest.fixture
def shared() -> dict[str, Any]:
    team = TeamFactory(name="Teal")
    submission = gpu_submission(team, {"rms_norm": SECRET_LINE + native("rms_norm")}, {
        "rms_norm": [
            gpu_shape(RMS_SHAPE, median_s=20e-6, kernels=[("_rms_norm_kernel", "dsl", 1, 15.0)]),
            gpu_shape("llama8b-decode-t1-h4096", median_s=None, passed=False, kernels=[])]})
    client = signed_in(member_of(team, "tia"))
    return {"team": team, "submission": submission, "client": client}


def turn_on(client: Client) -> None:
    assert client.post("/team/", {"share_links": "on"}).status_code == 200


def share(client: Client, submission: Submission, action: str = "create") -> Any:
    return client.post(f"/submissions/{submission.pk}/share/", {"share": action})


def test_sharing_is_off_until_the_team_turns_it_on(shared: dict[str, Any]) -> None:
    submission, client = shared["submission"], shared["client"]
    assert not shared["team"].share_links_enabled
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "Public link: off for your team" in page
    assert share(client, submission).status_code == 400
    submission.refresh_from_db()
    assert submission.share_token is None


def test_a_shared_link_shows_the_summary_to_anyone_without_the_source(
        shared: dict[str, Any]) -> None:
    submission, client = shared["submission"], shared["client"]
    turn_on(client)
    assert share(client, submission).status_code == 302
    submission.refresh_from_db()
    token = submission.share_token
    assert token is not None and len(token) >= TOKEN_BYTES * 4 // 3
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert f"/shared/{token}/" in page
    response = Client().get(f"/shared/{token}/")  # no sign-in
    assert response.status_code == 200
    html = response.content.decode()
    assert "scored" in html and "1 of 6 shapes correct" in html
    assert RMS_SHAPE in html and "20.00 µs" in html and "native" in html
    assert 'id="scores"' in html and "rms_norm" in html
    assert "SECRET_SOURCE_MARKER" not in html and "triton.jit" not in html
    assert "max abs error 0.5" not in html  # error messages quote sources: left out
    assert "_rms_norm_kernel" not in html  # kernel names are the team's too
    assert "13.98" not in html and "0.0139" not in html  # the shape's SOL, from the roofline
    assert response["Referrer-Policy"] == "no-referrer"
    assert "noindex" in response["X-Robots-Tag"]


def test_a_revoked_link_is_not_found(shared: dict[str, Any]) -> None:
    submission, client = shared["submission"], shared["client"]
    turn_on(client)
    share(client, submission)
    submission.refresh_from_db()
    token = submission.share_token
    assert share(client, submission, "revoke").status_code == 302
    assert Client().get(f"/shared/{token}/").status_code == 404
    share(client, submission)  # a new link is a new token
    submission.refresh_from_db()
    assert submission.share_token not in (None, token)
    assert AuditEntry.objects.filter(action="submission.unshare").count() == 1


def test_turning_sharing_off_revokes_every_link_for_good(shared: dict[str, Any]) -> None:
    submission, client = shared["submission"], shared["client"]
    turn_on(client)
    share(client, submission)
    submission.refresh_from_db()
    token = submission.share_token
    assert client.post("/team/", {"share_links": "off"}).status_code == 200
    assert Client().get(f"/shared/{token}/").status_code == 404
    turn_on(client)
    assert Client().get(f"/shared/{token}/").status_code == 404
    assert Submission.objects.get(pk=submission.pk).share_token is None


def test_a_hidden_teams_links_are_not_found(shared: dict[str, Any]) -> None:
    turn_on(shared["client"])
    share(shared["client"], shared["submission"])
    token = Submission.objects.get(pk=shared["submission"].pk).share_token
    Team.objects.filter(pk=shared["team"].pk).update(hidden=True)
    assert Client().get(f"/shared/{token}/").status_code == 404


def test_only_the_team_shares_its_submission(shared: dict[str, Any]) -> None:
    turn_on(shared["client"])
    submission = shared["submission"]
    other = signed_in(member_of(TeamFactory(name="Other"), "otto"))
    assert share(other, submission).status_code == 404
    admin = signed_in(UserFactory(username="root", is_staff=True))
    assert share(admin, submission).status_code == 403
    assert Submission.objects.get(pk=submission.pk).share_token is None


def test_made_up_tokens_find_nothing(shared: dict[str, Any]) -> None:
    turn_on(shared["client"])
    share(shared["client"], shared["submission"])
    for token in ("x", "a" * 32, "None"):
        assert Client().get(f"/shared/{token}/").status_code == 404


def test_a_check_is_labelled_on_its_public_page() -> None:
    team = TeamFactory(name="Checkers", share_links_enabled=True)
    submission = gpu_submission(team, {"gemm_fp16": native("gemm_fp16")}, {"gemm_fp16": [
        gpu_shape(GEMM_SHAPE, median_s=200e-6, kernels=[("_mm", "dsl", 1, 190.0)])]},
        mode="check")
    share(signed_in(member_of(team, "cy")), submission)
    token = Submission.objects.get(pk=submission.pk).share_token
    html = Client().get(f"/shared/{token}/").content.decode()
    assert 'class="badge check">check mode<' in html and "never ranked" in html
