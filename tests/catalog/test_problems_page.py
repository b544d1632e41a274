"""The problems page tells two versions of one release apart, says which one a bare name
means, and leads to each one's boards; a release page lists the DSLs it accepts."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from django.test import Client

from evaluation.catalog.importing import release_import
from evaluation.catalog.models import Release
from leaderboard.services import weight_set_from_release
from tests.paths import FIXTURE_RELEASE
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def second_version(tmp_path: Path) -> Release:
    changed = tmp_path / "atrex-fixture"
    shutil.copytree(FIXTURE_RELEASE, changed)
    (changed / "data" / "rms_norm" / "NOTES.md").write_text("a second version: one more file\n")
    return release_import(path=changed).release


def test_two_versions_of_one_release_differ_and_the_older_is_marked_superseded(
        tmp_path: Path) -> None:
    first = import_fixture_release()
    second = second_version(tmp_path)
    assert (first.name, first.version, second.version) == ("atrex-fixture", 1, 2)

    page = Client().get("/releases/").content.decode()
    rows = re.findall(r"<tr(?: class=\"superseded\")?><td><a href=\"/releases/\d+/\">"
                      r"atrex-fixture</a>.*?</tr>", page, flags=re.S)
    assert len(rows) == 2
    assert first.content_sha256[:12] in rows[1] and second.content_sha256[:12] in rows[0]
    assert "superseded by v2" in rows[1] and "superseded" not in rows[0]
    assert ">newest</span>" in rows[0]
    assert f'href="/boards/{first.pk}/H200/"' in rows[1]
    assert f'href="/boards/{second.pk}/H200/"' in rows[0]


def test_an_older_versions_pages_point_at_the_newest(tmp_path: Path) -> None:
    first = import_fixture_release()
    second = second_version(tmp_path)
    for release in (first, second):
        weight_set_from_release(release)
    for path in (f"/releases/{first.pk}/", f"/boards/{first.pk}/H200/"):
        page = Client().get(path).content.decode()
        assert 'id="superseded"' in page, path
        assert "atrex-fixture v2" in page and "alone means" in page
    for path in (f"/releases/{second.pk}/", f"/boards/{second.pk}/H200/"):
        assert 'id="superseded"' not in Client().get(path).content.decode(), path


def test_a_release_page_lists_every_dsl_it_accepts_the_default_first() -> None:
    release = import_fixture_release()
    page = Client().get(f"/releases/{release.pk}/").content.decode()
    dsls = re.search(r'<p id="release-dsls">(.*?)</p>', page, flags=re.S)
    assert dsls is not None and "Target DSL" not in page
    assert re.search(r"Triton \(<code>triton</code>\), the default; Gluon \(<code>gluon</code>\);"
                     r" CuTe DSL \(<code>cute</code>\)", dsls.group(1)), dsls.group(1)
