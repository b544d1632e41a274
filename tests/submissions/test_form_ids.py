"""Forms that name a row by id answer 400 for a malformed id, never 500, and change nothing."""

from __future__ import annotations

import io

import pytest
from django.test import Client

from portal.accounts.models import token_create
from submissions.models import Submission
from tests.factories import TeamFactory, UserFactory, member_of
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db
BAD_IDS = ["abc", "", "1.5", "-3", "²", "9" * 30]


def _file() -> io.BytesIO:
    file = io.BytesIO(b"class Model: pass\n")
    file.name = "rms_norm.py"
    return file


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_malformed_id_in_a_form_is_a_bad_request(bad: str) -> None:
    import_fixture_release()
    red = TeamFactory(name="Red")
    token, _ = token_create(team=red, name="laptop")
    alice, staff = Client(), Client()
    alice.force_login(member_of(red, "alice"))
    staff.force_login(UserFactory(username="staff", is_staff=True, is_superuser=True))
    statuses = [
        alice.post("/team/", {"revoke": bad}).status_code,
        alice.post("/submit/", {"file": _file(), "release": bad, "hardware": "H200"}).status_code,
        staff.post("/staff/quarantine/", {"result": bad, "decision": "accept"}).status_code,
    ]
    # An id too large for any row's column is malformed too (a 30-digit number once gave a
    # 500 in the upload form): every form answers 400 and changes nothing.
    assert statuses == [400] * 3
    token.refresh_from_db()
    assert token.revoked_at is None and not Submission.objects.exists()
