"""API tokens beyond tests/portal/test_pages.py (hashed, shown once, revocable): revoking is
the team's own business, a revoked token writes nothing, and no page shows a digest."""

from __future__ import annotations

import io

import pytest
from django.test import Client

from portal.accounts.models import ApiToken, token_create
from submissions.models import Submission
from tests.factories import TeamFactory, member_of
from tests.paths import SAMPLE_CANDIDATES
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def signed_in(user: object) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_another_team_cannot_revoke_a_token() -> None:
    red, blue = TeamFactory(name="Red"), TeamFactory(name="Blue")
    member_of(red, "alice")
    bob = member_of(blue, "bob")
    token, raw = token_create(team=red, name="laptop")
    signed_in(bob).post("/team/", {"revoke": token.pk})
    token.refresh_from_db()
    assert token.revoked_at is None
    assert Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/api/quota/").status_code == 200


def test_a_revoked_token_can_neither_read_nor_upload() -> None:
    release = import_fixture_release()
    red = TeamFactory(name="Red")
    alice = member_of(red, "alice")
    token, raw = token_create(team=red, name="laptop")
    signed_in(alice).post("/team/", {"revoke": token.pk})
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    upload = io.BytesIO((SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes())
    upload.name = "rms_norm.py"
    response = api.post("/api/submissions/", {"file": upload, "release": release.pk,
                                              "hardware": "H200"})
    assert response.status_code == 401 and not Submission.objects.exists()
    assert api.get("/api/submissions/").status_code == 401
    signed_in(alice).post("/team/", {"revoke": token.pk})  # revoking twice changes nothing
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def test_the_team_page_lists_its_own_tokens_by_prefix_only() -> None:
    red, blue = TeamFactory(name="Red"), TeamFactory(name="Blue")
    alice = member_of(red, "alice")
    mine, raw = token_create(team=red, name="laptop")
    token_create(team=blue, name="blue-secret-box")
    page = signed_in(alice).get("/team/").content.decode()
    assert mine.prefix in page and "laptop" in page
    assert raw not in page and mine.digest not in page and "blue-secret-box" not in page
