"""Upload -> queued -> evaluated by a real Celery worker (CPU mode) -> scored results."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.test import Client, override_settings

from evaluation.catalog.models import HardwareProfile
from submissions.models import EvaluationJob, ShapeResult
from submissions.services import submission_create
from tests.factories import TeamFactory, member_of
from tests.paths import SAMPLE_CANDIDATES
from tests.worker import pipeline_workers
from tests.world import import_fixture_release


def wait_for(job: EvaluationJob, seconds: float) -> EvaluationJob:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status in ("scored", "failed"):
            return job
        time.sleep(1)
    raise AssertionError(f"job still {job.status} after {seconds} s")


@pytest.mark.django_db(transaction=True)
@override_settings(ATREX_SHAPE_FILTER="dev-*")
def test_an_upload_is_evaluated_by_a_real_worker_and_scored(tmp_path: Path) -> None:
    release = import_fixture_release()
    team = TeamFactory()
    alice = member_of(team, "alice")
    with pipeline_workers(tmp_path):
        submission = submission_create(
            team=team, user=alice, release=release, hardware=HardwareProfile.objects.get(name="H200"),
            filename="rms_norm.py",
            data=(SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes(),
            agent="test-agent", model_name="test-model", output_tokens=1234)
        job = submission.candidates.get().job
        assert job.status == "queued" and job.shapes_total == 2
        job = wait_for(job, 240)
    log = (tmp_path / "worker.log").read_text()
    assert job.status == "scored", f"{job.error}\n{log[-3000:]}"
    assert job.attempts == 1 and job.shapes_done == 2 and job.heartbeat_at is not None
    results = ShapeResult.objects.filter(job=job).order_by("shape__position")
    assert [r.shape.shape_id for r in results] == ["dev-t4-h256", "dev-t3-h200"]
    for result in results:
        # a CPU run's record of "native" can be switched off from inside: stored unverified
        assert result.status == "passed" and result.verdict == "unverified-cpu"
        assert result.raw["adoption"]["verdict"] == "native"
        assert result.dsl_ratio == 1.0 and result.sol_s and result.sol_s > 0
        assert result.median_s is None and result.attainment is None  # CPU: not measured
        assert result.raw["trials_checked"] == 5

    client = Client()
    client.force_login(alice)
    api = client.get(f"/api/submissions/{submission.pk}/").json()
    assert api["status"] == "scored"
    assert [(r["shape_id"], r["verdict"]) for r in api["jobs"][0]["results"]] == [
        ("dev-t4-h256", "unverified-cpu"), ("dev-t3-h200", "unverified-cpu")]
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert 'id="submission-status">scored<' in page and page.count(">unverified-cpu<") == 2
    assert "hx-trigger" not in page  # finished: the page stops polling
