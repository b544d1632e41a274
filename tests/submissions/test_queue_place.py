"""A queued job says where it stands in its hardware's queue and when it may start: on its
page, in the API and in `atrex`'s progress."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.test import Client
from django.utils import timezone

from atrex_cli.main import queue_place_text
from evaluation.catalog.models import Release
from submissions.models import EvaluationJob
from tests.builders import honest_upload
from tests.factories import member_of

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_broker() -> Any:
    with mock.patch("submissions.jobs.current_app.send_task"):
        yield


def finished(release: Release, seconds: float) -> None:
    """A job that ran `seconds` on H200 and is scored."""
    job = EvaluationJob.objects.get(candidate__submission=honest_upload(release))
    start = timezone.now() - timedelta(hours=1)
    EvaluationJob.objects.filter(pk=job.pk).update(
        status="scored", started_at=start, finished_at=start + timedelta(seconds=seconds))


def test_a_queued_job_names_its_place_and_an_estimate(dev_release: Release) -> None:
    for seconds in (30, 60, 90):  # median 60 s
        finished(dev_release, seconds)
    running = EvaluationJob.objects.get(candidate__submission=honest_upload(dev_release))
    EvaluationJob.objects.filter(pk=running.pk).update(status="running", worker="gpu-0")
    ahead = honest_upload(dev_release)  # queued, before ours
    ours = honest_upload(dev_release)
    client = Client()
    client.force_login(member_of(ours.team, "quinn"))
    [job] = client.get(f"/api/submissions/{ours.pk}/").json()["jobs"]
    assert job["queue"]["position"] == 2 and job["queue"]["queued_ahead"] == 1
    assert job["queue"]["running"] == 1
    # two jobs ahead (one queued, one running), one worker: two rounds of the 60 s median
    assert job["queue"]["estimated_start_s"] == 120.0
    assert "median of the last 3 finished jobs" in job["queue"]["estimate_basis"]
    page = client.get(f"/submissions/{ours.pk}/").content.decode()
    assert "In the queue for H200: number 2 (1 queued before it, 1 running); estimated " \
           "start in about 2 min." in page
    assert queue_place_text(job["queue"]) == \
        "number 2 in the queue, 1 running, estimated start in ~120 s"
    assert set(job["queue"]) == {"position", "queued_ahead", "running", "estimated_start_s",
                                 "estimate_basis"}  # counts only: nothing of ahead's team
    assert ahead.team != ours.team


def test_without_history_there_is_a_place_but_no_estimate(dev_release: Release) -> None:
    ours = honest_upload(dev_release)
    client = Client()
    client.force_login(member_of(ours.team, "quinn"))
    [job] = client.get(f"/api/submissions/{ours.pk}/").json()["jobs"]
    assert job["queue"]["position"] == 1 and job["queue"]["estimated_start_s"] is None
    assert "no estimate yet" in client.get(f"/submissions/{ours.pk}/").content.decode()


def test_a_running_or_ended_job_has_no_place(dev_release: Release) -> None:
    ours = honest_upload(dev_release)
    EvaluationJob.objects.filter(candidate__submission=ours).update(status="running")
    client = Client()
    client.force_login(member_of(ours.team, "quinn"))
    [job] = client.get(f"/api/submissions/{ours.pk}/").json()["jobs"]
    assert job["queue"] is None and queue_place_text(None) == ""
