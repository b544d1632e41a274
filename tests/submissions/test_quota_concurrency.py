"""Quotas under parallel API requests: each request in its own thread and connection."""

from __future__ import annotations

import io
import threading
from unittest import mock

import pytest
from django.db import connection
from django.test import Client

from portal.accounts.models import token_create
from submissions.models import EvaluationJob, Submission
from tests.factories import TeamFactory
from tests.paths import SAMPLE_CANDIDATES
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db(transaction=True)
HONEST = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()
REQUESTS = 8


def parallel_uploads(daily: int, concurrent: int) -> tuple[list[int], int]:
    """REQUESTS uploads at once by one team; returns the status codes and the team's id."""
    release = import_fixture_release()
    team = TeamFactory(daily_submission_quota=daily, concurrent_job_quota=concurrent)
    _, secret = token_create(team=team, name="agent")
    barrier = threading.Barrier(REQUESTS)
    codes: list[int] = []

    def one() -> None:
        upload = io.BytesIO(HONEST)
        upload.name = "rms_norm.py"
        client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
        try:
            barrier.wait()
            codes.append(client.post("/api/submissions/", {
                "file": upload, "release": release.pk, "hardware": "H200"}).status_code)
        finally:
            connection.close()

    with mock.patch("submissions.jobs.dispatch_job"):
        threads = [threading.Thread(target=one) for _ in range(REQUESTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    return sorted(codes), team.pk


def test_parallel_api_uploads_never_overrun_the_daily_quota() -> None:
    codes, team = parallel_uploads(daily=3, concurrent=100)
    assert codes == [201] * 3 + [429] * (REQUESTS - 3)
    assert Submission.objects.filter(team=team).count() == 3
    # Every accepted upload has its job; no rejected one left anything behind.
    assert EvaluationJob.objects.filter(candidate__submission__team=team).count() == 3


def test_parallel_api_uploads_never_overrun_the_concurrent_quota() -> None:
    codes, team = parallel_uploads(daily=100, concurrent=2)
    assert codes == [201] * 2 + [429] * (REQUESTS - 2)
    assert EvaluationJob.objects.filter(candidate__submission__team=team,
                                        status="queued").count() == 2
