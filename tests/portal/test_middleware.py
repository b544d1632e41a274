"""A body larger than any upload is refused with 413 before it is read; a 404 never lists the
portal's URL patterns, even with DEBUG on."""

from __future__ import annotations

import io

import pytest
from django.test import Client, override_settings

from portal.accounts.models import token_create
from portal.middleware import BODY_MARGIN_BYTES
from submissions.models import Submission
from tests.factories import TeamFactory, member_of
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db
MAX_TOTAL = 4096


def oversized_upload() -> io.BytesIO:
    upload = io.BytesIO(b"#" * (MAX_TOTAL + BODY_MARGIN_BYTES + 1))
    upload.name = "rms_norm.py"
    return upload


@override_settings(ATREX_UPLOAD_MAX_TOTAL_BYTES=MAX_TOTAL)
def test_an_api_upload_over_the_cap_is_a_json_413_and_stores_nothing() -> None:
    release = import_fixture_release()
    _, token = token_create(team=TeamFactory(), name="cli")
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        "/api/submissions/", {"file": oversized_upload(), "release": release.pk,
                              "hardware": "H200"})
    assert response.status_code == 413
    assert f"{MAX_TOTAL + BODY_MARGIN_BYTES} bytes" in response.json()["detail"]
    assert not Submission.objects.exists()


@override_settings(ATREX_UPLOAD_MAX_TOTAL_BYTES=MAX_TOTAL)
def test_a_form_upload_over_the_cap_is_a_413_page_and_stores_nothing() -> None:
    release = import_fixture_release()
    client = Client()
    client.force_login(member_of(TeamFactory(), "alice"))
    response = client.post("/submit/", {"file": oversized_upload(), "release": release.pk,
                                        "hardware": "H200"})
    assert response.status_code == 413 and response["Content-Type"].startswith("text/html")
    assert 'id="too-large"' in response.content.decode()
    assert not Submission.objects.exists()


@override_settings(ATREX_UPLOAD_MAX_TOTAL_BYTES=MAX_TOTAL)
def test_a_body_within_the_cap_reaches_the_view() -> None:
    _, token = token_create(team=TeamFactory(), name="cli")
    upload = io.BytesIO(b"#" * MAX_TOTAL)
    upload.name = "rms_norm.py"
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        "/api/submissions/", {"file": upload, "release": 999999, "hardware": "H200"})
    assert response.status_code == 404  # the view ran: no such release


# What Django's technical 404 page shows: the URL patterns, their names, the URLconf.
URL_LIST_MARKS = ("<int:pk>", "admin/", "board-export", "api-submissions", "URLconf")


@override_settings(DEBUG=True)
@pytest.mark.parametrize("path", ["/no-such-page/", "/releases/999999/"])
def test_a_404_with_debug_on_lists_no_url_patterns(path: str) -> None:
    response = Client().get(path)
    assert response.status_code == 404
    page = response.content.decode()
    assert 'id="not-found"' in page
    assert not [mark for mark in URL_LIST_MARKS if mark in page]


@override_settings(DEBUG=True)
def test_with_debug_on_a_missing_slash_is_still_redirected_and_api_404s_stay_json() -> None:
    client = Client()
    assert client.get("/team").status_code == 301
    response = client.get("/api/submissions/-1/")
    assert response.status_code == 404 and response.json() == {"detail": "Not found."}
