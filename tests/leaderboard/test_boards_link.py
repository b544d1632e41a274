"""The header's Boards link leads to the board most recently submitted to, or home before any."""

from __future__ import annotations

import pytest
from django.test import Client

from evaluation.catalog.models import HardwareProfile
from submissions.services import submission_create
from tests.conftest import SAMPLE_CANDIDATES
from tests.factories import TeamFactory
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def test_boards_leads_home_before_any_submission_then_to_the_latest_ones_board() -> None:
    release = import_fixture_release()
    assert Client().get("/boards/")["Location"] == "/"
    source = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()
    for hardware in ("H200", "H100"):
        submission_create(team=TeamFactory(), user=None, release=release,
                          hardware=HardwareProfile.objects.get(name=hardware),
                          filename="rms_norm.py", data=source)
    assert Client().get("/boards/")["Location"] == f"/boards/{release.pk}/H100/"
    assert 'href="/boards/">Boards</a>' in Client().get("/").content.decode()
