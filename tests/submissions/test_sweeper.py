"""The sweeper: a running job whose worker went quiet is run again, then failed with a reason."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.utils import timezone

from evaluation.protocol import EVALUATE_TASK
from submissions.jobs import attempt_task_id, jobs_sweep, record_event
from submissions.models import EvaluationJob, ShapeResult
from tests.factories import member_of
from tests.paths import REPO
from tests.reports import event, timed_shape

pytestmark = pytest.mark.django_db
STALE = settings.ATREX_JOB_STALE_SECONDS


@pytest.fixture
def broker() -> Iterator[dict[str, mock.MagicMock]]:
    """What the sweeper sends, captured instead of reaching a broker."""
    with mock.patch("submissions.jobs.current_app") as app, \
            mock.patch("submissions.jobs.publish_stop") as stop:
        yield {"send_task": app.send_task, "revoke": app.control.revoke, "stop": stop}


def running(job: EvaluationJob, quiet_for: float) -> EvaluationJob:
    """`job` reported its first shape, then nothing for `quiet_for` seconds."""
    record_event("progress", event(job, run="run-a", shape=timed_shape("dev-t4-h256")))
    EvaluationJob.objects.filter(pk=job.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=quiet_for))
    job.refresh_from_db()
    return job


def sweep(capture: Callable[..., Any]) -> Any:
    with capture(execute=True):
        return jobs_sweep()


def test_a_quiet_job_is_run_again_as_a_new_attempt(
        job: EvaluationJob, broker: dict[str, mock.MagicMock],
        django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    running(job, quiet_for=STALE + 1)
    report = sweep(django_capture_on_commit_callbacks)
    job.refresh_from_db()
    assert report.requeued == [job.pk] and report.failed == []
    assert job.status == "queued" and job.attempts == 2 and job.run == ""
    sent = broker["send_task"].call_args.kwargs
    assert sent["args"][0]["attempt"] == 2 and sent["task_id"] == attempt_task_id(job.pk, 2)
    # The old attempt is revoked if still queued somewhere, and stopped if still running.
    broker["revoke"].assert_called_once_with([attempt_task_id(job.pk, 1)])
    assert broker["stop"].call_args.args[1] == {"job_id": job.pk, "up_to_attempt": 1, "run": ""}


def test_late_reports_of_the_abandoned_attempt_are_ignored(
        job: EvaluationJob, broker: dict[str, mock.MagicMock],
        django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    running(job, quiet_for=STALE + 1)
    sweep(django_capture_on_commit_callbacks)
    late = {**event(job, run="run-a"), "attempt": 1}
    record_event("progress", {**late, "shape": timed_shape("dev-t3-h200")})
    record_event("result", {**late, "result": {"shapes": [timed_shape("dev-t4-h256"),
                                                                timed_shape("dev-t3-h200")]}})
    job.refresh_from_db()
    assert job.status == "queued" and job.attempts == 2
    assert list(ShapeResult.objects.filter(job=job).values_list("attempt", flat=True)) == [1]
    record_event("result", {**event(job, run="run-b"), "result": {"shapes": [
        timed_shape("dev-t4-h256"), timed_shape("dev-t3-h200")]}})
    job.refresh_from_db()
    assert job.status == "scored" and job.shapes_done == 2
    assert ShapeResult.objects.filter(job=job, attempt=2).count() == 2


def test_a_job_that_reports_in_time_is_left_alone(
        job: EvaluationJob, broker: dict[str, mock.MagicMock],
        django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    running(job, quiet_for=STALE - 30)
    report = sweep(django_capture_on_commit_callbacks)
    job.refresh_from_db()
    assert report.requeued == report.failed == [] and job.status == "running"
    broker["send_task"].assert_not_called()


@override_settings(ATREX_JOB_MAX_ATTEMPTS=2)
def test_after_the_last_attempt_the_job_fails_with_a_reason_the_team_reads(
        job: EvaluationJob, broker: dict[str, mock.MagicMock],
        django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    running(job, quiet_for=STALE + 1)
    assert sweep(django_capture_on_commit_callbacks).requeued == [job.pk]
    job.refresh_from_db()
    running(job, quiet_for=STALE + 1)
    report = sweep(django_capture_on_commit_callbacks)
    job.refresh_from_db()
    assert report.failed == [job.pk] and job.status == "failed" and job.attempts == 2
    assert job.infrastructure_failure and job.finished_at is not None
    assert "stopped reporting" in job.error and "does not count against your quota" in job.error
    attempts_sent = [c for c in broker["send_task"].call_args_list if c.args[0] == EVALUATE_TASK]
    assert len(attempts_sent) == 1  # no third attempt (the other send is the rescore)

    client = Client()
    client.force_login(member_of(job.candidate.submission.team, "dana"))
    api = client.get(f"/api/submissions/{job.candidate.submission_id}/").json()
    assert api["status"] == "failed" and "stopped reporting" in api["jobs"][0]["error"]
    page = client.get(f"/submissions/{job.candidate.submission_id}/").content.decode()
    assert "stopped reporting for" in page


def test_the_sweeper_is_scheduled_by_celery_beat() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["sweep-stale-jobs"]
    assert entry["task"] == "submissions.sweep_jobs" and entry["options"]["queue"] == "results"
    assert entry["schedule"] == settings.ATREX_SWEEP_INTERVAL_SECONDS


def test_a_stale_threshold_shorter_than_three_heartbeats_stops_start_up() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings",
           "ATREX_JOB_HEARTBEAT_SECONDS": "30", "ATREX_JOB_STALE_SECONDS": "60"}
    started = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env,
                             cwd=REPO, capture_output=True, text=True, check=False)
    assert started.returncode != 0 and "ATREX_JOB_STALE_SECONDS" in started.stderr
