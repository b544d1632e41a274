"""What the team API adds for clients (the `atrex` CLI): the active score of a submission,
and the release's DSL settings."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from evaluation.catalog.models import HardwareProfile, Shape
from leaderboard.services import rescore_submission, weight_set_from_release
from portal.accounts.models import token_create
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from tests.factories import TeamFactory
from tests.paths import SAMPLE_CANDIDATES
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def token_client(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def test_the_submission_api_gives_the_active_score_and_whether_it_is_current() -> None:
    release = import_fixture_release()
    weight_set_from_release(release)
    team = TeamFactory()
    _, token = token_create(team=team, name="cli")
    submission = Submission.objects.create(team=team, release=release,
                                           hardware=HardwareProfile.objects.get(name="H200"))
    operator = release.operators.get(name="rms_norm")
    candidate = Candidate.objects.create(submission=submission, operator=operator,
                                         source="class Model: pass", sha256="0" * 64)
    job = EvaluationJob.objects.create(candidate=candidate, status="scored", attempts=1,
                                       finished_at=timezone.now())
    for shape in Shape.objects.filter(operator=operator):
        ShapeResult.objects.create(job=job, attempt=1, shape=shape, status="passed",
                                   verdict="native", attainment=0.5, raw={})
    api = token_client(token)
    assert api.get(f"/api/submissions/{submission.pk}/").json()["score"] is None

    rescore_submission(submission)
    score = api.get(f"/api/submissions/{submission.pk}/").json()["score"]
    assert score["weights_version"] == 1 and score["current"] is True
    assert score["by_operator"]["rms_norm"] == pytest.approx(0.5)
    assert score["correctness_rate"] == 1.0 and score["ranked"] is True

    # Evaluated in Triton's interpreter: correct, but no board ranks it, and the API agrees.
    EvaluationJob.objects.filter(pk=job.pk).update(mode=EvaluationJob.Mode.INTERPRETER)
    rescore_submission(submission)
    assert api.get(f"/api/submissions/{submission.pk}/").json()["score"]["ranked"] is False
    EvaluationJob.objects.filter(pk=job.pk).update(mode=EvaluationJob.Mode.UNKNOWN)
    rescore_submission(submission)

    # A job that ended after the score was computed: its rescore has not run yet.
    EvaluationJob.objects.filter(pk=job.pk).update(
        finished_at=timezone.now() + timedelta(seconds=5))
    assert api.get(f"/api/submissions/{submission.pk}/").json()["score"]["current"] is False


def test_releases_list_their_dsl_and_adoption_threshold() -> None:
    release = import_fixture_release()
    listed = Client().get("/api/releases/").json()
    assert [(r["id"], r["dsl"], r["dsl_ratio_threshold"]) for r in listed] == [
        (release.pk, "triton", release.dsl_ratio_threshold)]


def test_the_schema_describes_the_score_and_the_threshold() -> None:
    schema = Client().get("/api/schema/?format=json").json()
    components = schema["components"]["schemas"]
    assert {"current", "aggregate", "decode", "by_operator"} <= set(
        components["SubmissionScoreOut"]["properties"])
    assert "dsl_ratio_threshold" in components["ReleaseOut"]["properties"]


HONEST = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()
THIRTY_DIGITS = "1" * 30
# (what is bad, the form fields it changes, the source uploaded, what the message says)
BAD_UPLOADS = {
    "30-digit output tokens": ({"output_tokens": THIRTY_DIGITS}, HONEST, "output_tokens"),
    "30-digit release": ({"release": THIRTY_DIGITS}, HONEST, "release"),
    "nested parentheses": ({}, ("(" * 100000 + ")" * 100000).encode(), "nested parentheses"),
    "unary minus chain": ({}, ("-" * 200000 + "1").encode(), "nested too deeply"),
    "nested brackets": ({}, ("[" * 5000).encode(), "nested parentheses"),
    "long addition": ({}, ("x = " + "+".join(["1"] * 200000)).encode(), "nested too deeply"),
}


@pytest.mark.parametrize("fields, source, message", BAD_UPLOADS.values(), ids=BAD_UPLOADS.keys())
def test_a_bad_value_in_an_api_upload_is_a_400_with_its_reason_and_stores_nothing(
        fields: dict[str, str], source: bytes, message: str) -> None:
    release = import_fixture_release()
    _, token = token_create(team=TeamFactory(), name="cli")
    upload = io.BytesIO(source)
    upload.name = "rms_norm.py"
    response = token_client(token).post("/api/submissions/", {
        "file": upload, "release": release.pk, "hardware": "H200", **fields})
    assert response.status_code == 400
    assert message in str(response.json())
    assert not Submission.objects.exists() and not Candidate.objects.exists()
