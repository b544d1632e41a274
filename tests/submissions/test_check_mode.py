"""Check submissions: evaluated like ranked ones (on a GPU: timed), labelled as checks on
every page, in the API and the CLI, and rationed by their own, larger daily quota."""

from __future__ import annotations

import re
from typing import Any
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from evaluation.catalog.models import HardwareProfile, Release
from leaderboard.services import rescore_submission
from portal.accounts.models import DEFAULT_DAILY_CHECK_QUOTA, Team, token_create
from submissions.models import EvaluationJob, Submission
from submissions.services import QuotaExceeded, quota_status, submission_create
from tests.factories import TeamFactory, member_of
from tests.pages import text
from tests.paths import SAMPLE_CANDIDATES
from tests.reports import DEV_SHAPES, checked_shape, finish

pytestmark = pytest.mark.django_db

NATIVE = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()


@pytest.fixture(autouse=True)
def _no_broker() -> Any:
    with mock.patch("submissions.jobs.current_app.send_task"):
        yield


def upload(team: Team, release: Release, mode: str = "ranked") -> Submission:
    submission = submission_create(team=team, user=None, release=release,
                                   hardware=HardwareProfile.objects.get(name="H200"),
                                   filename="rms_norm.py", data=NATIVE, mode=mode)
    EvaluationJob.objects.filter(candidate__submission=submission).update(attempts=1)
    return submission


def token_client(team: Team) -> Client:
    _, raw = token_create(team=team, name="cli", created_by=None)
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def test_the_check_quota_is_larger_than_the_submission_quota_by_default() -> None:
    team = TeamFactory()
    assert team.daily_check_quota == DEFAULT_DAILY_CHECK_QUOTA > team.daily_submission_quota


def test_a_check_counts_against_the_check_quota_not_the_submission_quota(
        dev_release: Release) -> None:
    team = TeamFactory()
    upload(team, dev_release, "check")
    upload(team, dev_release, "ranked")
    quota = quota_status(team)
    assert (quota.used_today, quota.checks_today) == (1, 1)
    assert quota.remaining_checks == DEFAULT_DAILY_CHECK_QUOTA - 1


def test_checks_go_on_when_the_submission_quota_is_used_up_and_stop_at_their_own(
        dev_release: Release) -> None:
    team = TeamFactory(daily_submission_quota=1, daily_check_quota=2, concurrent_job_quota=10)
    upload(team, dev_release, "ranked")
    with pytest.raises(QuotaExceeded, match="daily quota of 1 submissions"):
        upload(team, dev_release, "ranked")
    upload(team, dev_release, "check")
    upload(team, dev_release, "check")
    with pytest.raises(QuotaExceeded, match="daily quota of 2 check submissions"):
        upload(team, dev_release, "check")
    assert Submission.objects.filter(team=team, mode="check").count() == 2


def test_a_check_run_in_the_interpreter_uses_no_check_quota(dev_release: Release) -> None:
    team = TeamFactory()
    finish(upload(team, dev_release, "check").candidates.get().job,
           *(checked_shape(s) for s in DEV_SHAPES), mode="cpu-interpreter")
    assert quota_status(team).checks_today == 0


def test_checks_share_the_limit_of_concurrent_evaluations(dev_release: Release) -> None:
    team = TeamFactory(concurrent_job_quota=1)
    upload(team, dev_release, "check")
    with pytest.raises(QuotaExceeded, match="still being evaluated"):
        upload(team, dev_release, "ranked")


def test_the_api_takes_the_mode_and_labels_the_check(dev_release: Release) -> None:
    team = TeamFactory()
    client = token_client(team)
    response = client.post("/api/submissions/", {
        "file": SimpleUploadedFile("rms_norm.py", NATIVE), "release": dev_release.pk,
        "hardware": "H200", "mode": "check"})
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["mode"] == "check" and created["outcome"]["check"] is True
    assert created["outcome"]["summary"].endswith("(check mode)")
    EvaluationJob.objects.filter(candidate__submission_id=created["id"]).update(attempts=1)
    finish(EvaluationJob.objects.get(candidate__submission_id=created["id"]),
           *(checked_shape(s, median_s=20e-6) for s in DEV_SHAPES))
    rescore_submission(Submission.objects.get(pk=created["id"]))
    detail = client.get(f"/api/submissions/{created['id']}/").json()
    assert detail["outcome"]["summary"] == "scored: 2 of 2 shapes correct (check mode)"
    assert detail["score"]["ranked"] is False  # a check is never ranked
    quota = client.get("/api/quota/").json()
    assert (quota["used_today"], quota["checks_today"]) == (0, 1)
    assert quota["remaining_checks"] == quota["check_limit"] - 1


def test_a_ranked_submission_is_the_default_and_an_unknown_mode_is_refused(
        dev_release: Release) -> None:
    client = token_client(TeamFactory())
    ranked = client.post("/api/submissions/", {
        "file": SimpleUploadedFile("rms_norm.py", NATIVE), "release": dev_release.pk,
        "hardware": "H200"}).json()
    assert ranked["mode"] == "ranked" and ranked["outcome"]["check"] is False
    assert "check" not in ranked["outcome"]["summary"]
    refused = client.post("/api/submissions/", {
        "file": SimpleUploadedFile("rms_norm.py", NATIVE), "release": dev_release.pk,
        "hardware": "H200", "mode": "secret"})
    assert refused.status_code == 400 and Submission.objects.count() == 1


def test_the_upload_form_submits_a_check_and_the_pages_label_it(dev_release: Release) -> None:
    team = TeamFactory()
    client = Client()
    client.force_login(member_of(team, "cara"))
    form = client.get("/submit/").content.decode()
    assert 'name="mode" value="check"' in form and "checks left today" in form
    response = client.post("/submit/", {"file": SimpleUploadedFile("rms_norm.py", NATIVE),
                                        "release": dev_release.pk, "hardware": "H200",
                                        "mode": "check"})
    submission = Submission.objects.get()
    assert response.status_code == 302 and submission.mode == "check"
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert 'id="check-notice"' in page and "never enters a board" in page
    assert 'class="badge check">check mode<' in page
    team_page = client.get("/team/").content.decode()
    row = re.search(rf'<tr><td><a href="/submissions/{submission.pk}/">(.*?)</tr>', team_page,
                    re.S)
    assert row is not None and "check mode" in text(row.group(1))
    assert " 99 of 100 checks left today " in text(team_page)


def test_a_rejected_check_upload_keeps_the_mode_chosen(dev_release: Release) -> None:
    client = Client()
    client.force_login(member_of(TeamFactory(), "cid"))
    response = client.post("/submit/", {"file": SimpleUploadedFile("rms_norm.py", b"x = ("),
                                        "release": dev_release.pk, "hardware": "H200",
                                        "mode": "check"})
    assert response.status_code == 400
    assert 'name="mode" value="check" checked' in response.content.decode()
