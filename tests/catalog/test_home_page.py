"""The home page tells two versions of one release apart and leads to each one's boards."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from django.test import Client

from evaluation.catalog.importing import release_import
from tests.conftest import FIXTURE_RELEASE
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def test_two_versions_of_one_release_differ_on_the_home_page_and_link_their_boards(
        tmp_path: Path) -> None:
    first = import_fixture_release()
    changed = tmp_path / "atrex-fixture"
    shutil.copytree(FIXTURE_RELEASE, changed)
    notes = changed / "data" / "rms_norm" / "NOTES.md"
    notes.write_text("a second version: one more file\n")
    second = release_import(path=changed).release
    assert (first.name, first.version, second.version) == ("atrex-fixture", 1, 2)

    page = Client().get("/").content.decode()
    rows = re.findall(r"<tr><td><a href=\"/releases/\d+/\">atrex-fixture</a>.*?</tr>", page,
                      flags=re.S)
    assert len(rows) == 2
    assert first.content_sha256[:12] in rows[1] and second.content_sha256[:12] in rows[0]
    assert first.content_sha256[:12] != second.content_sha256[:12]
    assert f'href="/boards/{first.pk}/H200/"' in rows[1]
    assert f'href="/boards/{second.pk}/H200/"' in rows[0]
