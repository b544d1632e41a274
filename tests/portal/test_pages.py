"""Team pages: tokens shown once and revocable, uploads from the form."""

from __future__ import annotations

import io
import re

import pytest
from django.test import Client

from evaluation.catalog.models import Release
from portal.accounts.models import ApiToken, hash_token
from submissions.models import Submission
from tests.factories import TeamFactory, member_of
from tests.paths import SAMPLE_CANDIDATES

pytestmark = pytest.mark.django_db


@pytest.fixture
def release_pk(release: Release) -> int:
    return int(release.pk)  # pks differ across databases


@pytest.fixture
def alice_client(release_pk: int) -> Client:
    client = Client()
    client.force_login(member_of(TeamFactory(name="Red"), "alice"))
    return client


def test_a_token_is_shown_once_stored_hashed_and_revocable(alice_client: Client) -> None:
    page = alice_client.post("/team/", {"token_name": "laptop"}).content.decode()
    raw = re.search(r'id="new-token">(atx_[^<]+)<', page).group(1)  # type: ignore[union-attr]
    token = ApiToken.objects.get(name="laptop")
    assert token.digest == hash_token(raw) and raw not in (token.prefix, token.digest)
    assert raw not in alice_client.get("/team/").content.decode()  # never shown again
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/quota/").json()["team"] == "Red"
    alice_client.post("/team/", {"revoke": token.pk})
    assert api.get("/api/quota/").status_code == 401


def test_the_upload_form_submits_and_redirects_to_the_submission(alice_client: Client,
                                                                 release_pk: int) -> None:
    upload = io.BytesIO((SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes())
    upload.name = "rms_norm.py"
    response = alice_client.post("/submit/", {"file": upload, "release": release_pk,
                                              "hardware": "H200", "agent": "claude",
                                              "output_tokens": "1200"})
    submission = Submission.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/submissions/{submission.pk}/"
    assert submission.agent == "claude" and submission.output_tokens == 1200
    page = alice_client.get(response["Location"]).content.decode()
    assert 'hx-trigger="every 2s"' in page and "rms_norm" in page  # live while queued


def test_a_rejected_form_upload_shows_its_message_and_stores_nothing(alice_client: Client,
                                                                    release_pk: int) -> None:
    upload = io.BytesIO(b"../../etc")
    upload.name = "evil.tar.gz"
    response = alice_client.post("/submit/", {"file": upload, "release": release_pk,
                                              "hardware": "H200"})
    assert response.status_code == 400
    assert 'id="upload-error"' in response.content.decode()
    assert Submission.objects.count() == 0


THIRTY_DIGITS = "1" * 30
HONEST = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()
# (what is bad, the form fields it changes, the source uploaded, what the message says)
BAD_UPLOADS = {
    "30-digit output tokens": ({"output_tokens": THIRTY_DIGITS}, HONEST, "output_tokens"),
    "5000-digit output tokens": ({"output_tokens": "9" * 5000}, HONEST, "output_tokens"),
    "superscript digit tokens": ({"output_tokens": "\u00b2"}, HONEST, "output_tokens"),
    "30-digit release": ({"release": THIRTY_DIGITS}, HONEST, "release"),
    "NUL in the agent": ({"agent": "bot\x00"}, HONEST, "NUL"),
    "NUL in the hardware": ({"hardware": "H200\x00"}, HONEST, "NUL"),
    "notes too long": ({"notes": "n" * 10001}, HONEST, "notes"),
    # refused, as the API refuses it, not cut to 100 characters and stored
    "agent too long": ({"agent": "a" * 101}, HONEST, "agent: at most 100 characters"),
    "model too long": ({"model": "m" * 101}, HONEST, "model: at most 100 characters"),
    "nested parentheses": ({}, ("(" * 100000 + ")" * 100000).encode(), "nested parentheses"),
    "unary minus chain": ({}, ("-" * 200000 + "1").encode(), "nested too deeply"),
    "nested brackets": ({}, ("[" * 5000).encode(), "nested parentheses"),
    "long addition": ({}, ("x = " + "+".join(["1"] * 200000)).encode(), "nested too deeply"),
}


@pytest.mark.parametrize("fields, source, message", BAD_UPLOADS.values(), ids=BAD_UPLOADS.keys())
def test_a_bad_value_in_the_upload_form_is_a_400_with_its_reason_and_stores_nothing(
        alice_client: Client, release_pk: int, fields: dict[str, str], source: bytes,
        message: str) -> None:
    upload = io.BytesIO(source)
    upload.name = "rms_norm.py"
    response = alice_client.post("/submit/", {"file": upload, "release": release_pk,
                                              "hardware": "H200", **fields})
    assert response.status_code == 400
    error = re.search(r'id="upload-error">([^<]*)<', response.content.decode())
    assert error is not None and message in error.group(1)
    assert Submission.objects.count() == 0


def test_the_api_answers_every_domain_error_with_its_own_status() -> None:
    """One base (portal.errors.DomainError), one mapping (portal.api_errors)."""
    from leaderboard.scoring import WeightError
    from portal.api_errors import exception_handler
    from submissions.services import QuotaExceeded
    from submissions.sharing import SharingDisabled
    from submissions.upload import UploadRejected
    from submissions.webhooks import WebhookRejected

    for error, expected in ((UploadRejected("bad"), 400), (QuotaExceeded("used"), 429),
                            (SharingDisabled("off"), 400), (WebhookRejected("private"), 400),
                            (WeightError("negative"), 400)):
        response = exception_handler(error, {})
        assert response is not None and response.status_code == expected
        assert response.data == {"detail": str(error)}


# (the field and value posted, what the page and the API both say of it)
SAME_PARSER = {
    "agent": ("a" * 101, "at most 100 characters"),
    "output_tokens": ("-3", "expected a whole number from 0 to"),
    "mode": ("secret", "Select a valid choice"),
    "hardware": ("H200\x00", "text may not contain NUL characters"),
}


@pytest.mark.parametrize("field", SAME_PARSER)
def test_the_page_and_the_api_refuse_a_field_with_the_same_words(alice_client: Client,
                                                                 release_pk: int,
                                                                 field: str) -> None:
    """One parser (submissions.forms.SubmissionForm) for the upload page and the API."""
    from portal.accounts.models import token_create

    value, words = SAME_PARSER[field]
    fields = {"release": release_pk, "hardware": "H200", field: value}
    page_upload = io.BytesIO(HONEST)
    page_upload.name = "rms_norm.py"
    page = alice_client.post("/submit/", {"file": page_upload, **fields})
    error = re.search(r'id="upload-error">([^<]*)<', page.content.decode())
    assert page.status_code == 400 and error is not None
    assert error.group(1).startswith(f"{field}: ") and words in error.group(1)
    _, raw = token_create(team=TeamFactory(name="Blue"), name="cli")
    api_upload = io.BytesIO(HONEST)
    api_upload.name = "rms_norm.py"
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}").post("/api/submissions/",
                                                          {"file": api_upload, **fields})
    assert api.status_code == 400 and words in api.json()[field][0]
    assert Submission.objects.count() == 0


def test_the_api_describes_the_upload_with_the_forms_own_fields() -> None:
    from submissions.forms import SubmissionForm

    schema = Client().get("/api/schema/?format=json").json()
    body = schema["paths"]["/api/submissions/"]["post"]["requestBody"]["content"]
    upload = body["multipart/form-data"]["schema"]
    assert set(upload["properties"]) == set(SubmissionForm.base_fields)
    assert set(upload["required"]) == {"file", "release", "hardware"}
    assert upload["properties"]["agent"]["maxLength"] == 100
    assert upload["properties"]["file"] == {"type": "string", "format": "binary"}
    assert upload["properties"]["mode"]["enum"] == ["ranked", "check"]
