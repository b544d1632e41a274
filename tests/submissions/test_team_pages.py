"""Where a signed-in user lands and which links the header offers: a team's pages for its
members; a landing page, not a 404, for an admin (or anyone) in no team. A rejected upload
keeps what was entered in the form."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from evaluation.catalog.importing import release_import
from evaluation.catalog.models import Release
from submissions.models import Submission
from tests.factories import UserFactory
from tests.paths import FIXTURE_RELEASE
from tests.world import World, build_world, extended

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"  # tests.factories.UserFactory's


@dataclass(frozen=True)
class LandingWorld(World):
    submission: Submission  # Red's
    nomad: User  # in no team, not an admin


@pytest.fixture
def world() -> LandingWorld:
    world = build_world()
    submission = Submission.objects.create(team=world.red, release=world.release,
                                           hardware=world.h200)
    return extended(world, LandingWorld, submission=submission,
                    nomad=UserFactory(username="nomad"))


def signed_in(username: str) -> tuple[Client, str]:
    """Sign in through the form, as a person does; the page it lands on."""
    client = Client()
    response = client.post("/accounts/login/", {"username": username, "password": PASSWORD},
                           follow=True)
    assert response.status_code == 200, response.redirect_chain
    return client, response.content.decode()


def header(html: str) -> str:
    return html.split("<header>")[1].split("</header>")[0]


def test_an_admin_in_no_team_lands_on_every_teams_submissions_after_signing_in(
        world: LandingWorld) -> None:
    _, landing = signed_in("root")
    assert 'id="no-team"' in landing and "not a member of any team" in landing
    row = re.search(rf'<a href="/submissions/{world.submission.pk}/">.*?</tr>', landing, re.S)
    assert row is not None and "<td>Red</td>" in row.group(0)  # the team column
    assert 'href="/staff/quarantine/"' in landing and 'href="/admin/"' in landing
    links = header(landing)
    assert ">Submissions</a>" in links and 'href="/submit/"' not in links
    assert ">Team</a>" not in links


def test_an_admin_in_no_team_is_told_why_there_is_no_upload_form(world: LandingWorld) -> None:
    client, _ = signed_in("root")
    response = client.get("/submit/")
    html = response.content.decode()
    assert response.status_code == 200 and "<form method=\"post\" enctype" not in html
    assert "Submissions belong to a team" in html and 'href="/admin/"' in html
    upload = SimpleUploadedFile("rms_norm.py", b"class Model: pass\n")
    refused = client.post("/submit/", {"file": upload, "release": world.release.pk,
                                       "hardware": "H200"})
    assert refused.status_code == 403 and not Submission.objects.exclude(
        pk=world.submission.pk).exists()


def test_a_user_in_no_team_is_asked_to_get_one(world: LandingWorld) -> None:
    _, landing = signed_in("nomad")
    assert "No team yet" in landing and "Ask an admin" in landing
    assert f"/submissions/{world.submission.pk}/" not in landing  # nothing of others
    assert 'href="/submit/"' not in header(landing)


def test_a_team_member_lands_on_the_team_page_with_team_and_submit_links(
        world: LandingWorld) -> None:
    _, landing = signed_in("ruby")
    assert "<h1>Red</h1>" in landing
    links = header(landing)
    assert ">Team</a>" in links and 'href="/submit/"' in links


@pytest.fixture
def two_releases(world: LandingWorld, tmp_path: Path) -> tuple[Release, Release]:
    copy = tmp_path / "atrex-fixture"
    shutil.copytree(FIXTURE_RELEASE, copy)
    reference = copy / "data" / "rms_norm" / "reference.py"
    reference.write_text(reference.read_text() + "\n# v2\n")
    newer = release_import(path=copy).release
    assert newer.version == 2
    return world.release, newer


def test_a_rejected_upload_keeps_the_forms_fields_and_its_release(
        world: LandingWorld, two_releases: tuple[Release, Release]) -> None:
    older, newer = two_releases
    client = Client()
    client.force_login(world.ruby)
    form = client.get("/submit/").content.decode()
    assert form.index(f'value="{newer.pk}"') < form.index(f'value="{older.pk}"')  # the default
    fields = {"release": str(older.pk), "hardware": "H100", "operator": "rms_norm",
              "agent": "my-agent", "model": "my-model", "output_tokens": "1234",
              "notes": "second try <b>"}
    upload = SimpleUploadedFile("kernel.py", b"class Model(:\n")  # a syntax error
    response = client.post("/submit/", {**fields, "file": upload})
    html = response.content.decode()
    assert response.status_code == 400 and "syntax error" in html
    assert f'<option value="{older.pk}" selected>' in html  # not switched to the newest
    assert '<option value="H100" selected>H100</option>' in html
    assert '<option value="rms_norm" selected>rms_norm</option>' in html  # the operator list
    # the refusal names the file the team uploaded, evaluated as the chosen operator's
    assert "kernel.py (as rms_norm.py): syntax error on line 1" in html
    for name in ("agent", "model", "output_tokens"):
        assert re.search(rf'name="{name}"[^>]*value="{fields[name]}"', html), name
    assert ">second try &lt;b&gt;</textarea>" in html
    assert "choose the file again" in html
