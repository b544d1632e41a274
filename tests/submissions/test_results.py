"""The results consumer: idempotent per attempt, ignores stale and ended jobs, scores shapes."""

from __future__ import annotations

import pytest
from django.test import Client

from submissions.jobs import record_event
from submissions.models import EvaluationJob, ShapeResult
from tests.factories import member_of
from tests.reports import event, timed_shape

pytestmark = pytest.mark.django_db


def test_a_redelivered_progress_event_stores_one_result(job: EvaluationJob) -> None:
    for _ in range(2):
        record_event("progress", event(job, done=1, total=8,
                                       shape=timed_shape("llama8b-prefill-t4096-h4096")))
    job.refresh_from_db()
    assert job.status == "running" and job.shapes_done == 1 and job.worker == "gpu-1"
    assert ShapeResult.objects.filter(job=job).count() == 1


def test_attainment_comes_from_the_hidden_roofline(job: EvaluationJob) -> None:
    record_event("progress", event(job, shape=timed_shape("llama8b-prefill-t4096-h4096", 20e-6)))
    result = ShapeResult.objects.get(job=job)
    # W/Q of rms_norm 4096x4096 bf16: Q = 2*4096*4096*2 + 2*4096 bytes; memory-bound on H200.
    sol = (2 * 4096 * 4096 * 2 + 2 * 4096) / 4.8e12
    assert result.sol_s == pytest.approx(sol)
    assert result.attainment == pytest.approx(sol / 20e-6)
    assert not result.suspicious


def test_a_time_below_sol_is_quarantined_as_suspicious(job: EvaluationJob) -> None:
    record_event("progress", event(job, shape=timed_shape("llama8b-prefill-t4096-h4096", 1e-6)))
    result = ShapeResult.objects.get(job=job)
    assert result.attainment > 1 and result.suspicious


def test_events_of_an_older_attempt_are_ignored(job: EvaluationJob) -> None:
    record_event("progress", {**event(job, shape=timed_shape("dev-t4-h256")), "attempt": 0})
    assert ShapeResult.objects.count() == 0


def test_the_result_event_scores_the_job_and_later_events_are_ignored(job: EvaluationJob) -> None:
    record_event("result", event(job, result={"evaluator_version": "0.1.0",
                                              "shapes": [timed_shape("dev-t4-h256", None)]}))
    job.refresh_from_db()
    assert job.status == "scored" and job.finished_at is not None
    record_event("failed", event(job, reason="late"))
    job.refresh_from_db()
    assert job.status == "scored"


def test_a_cancelled_job_ignores_what_its_worker_still_sends(job: EvaluationJob) -> None:
    team = job.candidate.submission.team
    client = Client()
    client.force_login(member_of(team, "carol"))
    response = client.post(f"/api/submissions/{job.candidate.submission_id}/cancel/")
    assert response.status_code == 200 and response.json()["jobs"][0]["status"] == "cancelled"
    record_event("progress", event(job, shape=timed_shape("dev-t4-h256")))
    assert ShapeResult.objects.count() == 0


def test_an_infrastructure_failure_is_marked_and_does_not_use_quota(job: EvaluationJob) -> None:
    record_event("failed", event(job, reason="HarnessError: no GPU", infrastructure=True))
    job.refresh_from_db()
    assert job.status == "failed" and job.infrastructure_failure and "no GPU" in job.error
