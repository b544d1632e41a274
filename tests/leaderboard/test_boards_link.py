"""The header's Boards link leads to the boards index: every release by every hardware, the
rows each holds, and the fullest one to open (no longer the board of the newest submission,
which on a first run was a lone baseline, or an empty board after a check)."""

from __future__ import annotations

import pytest
from django.test import Client

from evaluation.catalog.models import HardwareProfile
from leaderboard.services import weight_set_from_release
from submissions.models import Submission
from submissions.services import submission_create
from tests.factories import TeamFactory
from tests.paths import SAMPLE_CANDIDATES
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def test_boards_is_an_index_whatever_was_submitted_last() -> None:
    assert "No release imported yet" in Client().get("/boards/").content.decode()
    release = import_fixture_release()
    weight_set_from_release(release)
    submission_create(team=TeamFactory(), user=None, release=release,
                      hardware=HardwareProfile.objects.get(name="H100"), filename="rms_norm.py",
                      data=(SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes(),
                      mode=Submission.Mode.CHECK)
    reply = Client().get("/boards/")
    assert reply.status_code == 200
    page = reply.content.decode()
    assert f'data-release="{release.pk}"' in page and "Open:" not in page  # no board has rows
    assert 'href="/boards/">Boards</a>' in Client().get("/").content.decode()
