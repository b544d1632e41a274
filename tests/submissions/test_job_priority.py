"""Baselines and admin re-runs wait for teams: they go to eval.<hardware>.low, which a GPU
worker takes only while no team job waits, and a team's queue place leaves them out."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from django.test import Client
from kombu import Connection, Exchange, Queue

from evaluation.catalog.models import Release
from evaluation.protocol import FILESYSTEM_TRANSPORT, broker_settings, worker_queues
from submissions.jobs import dispatch_job, job_rerun
from submissions.models import EvaluationJob, Submission
from tests.builders import honest_upload
from tests.factories import UserFactory, member_of

pytestmark = pytest.mark.django_db


def test_a_worker_lists_every_team_queue_before_the_low_ones() -> None:
    assert worker_queues("eval.H100,eval.H200") == (
        "eval.H100,eval.H200,eval.H100.low,eval.H200.low")
    assert worker_queues("eval.H200, eval.H200.low") == "eval.H200,eval.H200.low"


def drained_order(folder: Path) -> list[str]:
    """Team message, two low ones; one taken; then a second team message: what comes next."""
    options = broker_settings("filesystem://", folder)["broker_transport_options"]
    exchange = Exchange("atrex-test", type="direct")
    team, low = (Queue(name, exchange, routing_key=name) for name in ("eval.H200", "eval.H200.low"))
    got: list[str] = []
    with Connection(transport=FILESYSTEM_TRANSPORT, transport_options=options) as connection:
        producer = connection.Producer()
        for queue, body in ((low, "baseline-1"), (low, "baseline-2"), (team, "team-1")):
            producer.publish(body, exchange=exchange, routing_key=queue.name, declare=[queue])
        with connection.Consumer([team, low], callbacks=[lambda body, m: (got.append(body),
                                                                          m.ack())]):
            connection.drain_events(timeout=5)
            # kombu's own (round-robin) cycle would now look at the low queue first, and
            # hand out a baseline before team-2
            producer.publish("team-2", exchange=exchange, routing_key=team.name, declare=[team])
            for _ in range(3):
                connection.drain_events(timeout=5)
    return got


def test_the_embedded_broker_hands_out_team_jobs_before_low_ones(tmp_path: Path) -> None:
    got = drained_order(tmp_path / "a")
    # (two messages of one millisecond keep no order between them in kombu's file names)
    assert got[:2] == ["team-1", "team-2"] and sorted(got[2:]) == ["baseline-1", "baseline-2"]


def test_baselines_and_admin_reruns_go_to_the_low_queue_team_jobs_do_not(
        dev_release: Release) -> None:
    team = honest_upload(dev_release)
    baseline = honest_upload(dev_release)
    Submission.objects.filter(pk=baseline.pk).update(baseline=Submission.Baseline.PYTORCH)
    with mock.patch("submissions.jobs.current_app") as app:
        for submission in (team, baseline):
            EvaluationJob.objects.filter(candidate__submission=submission).update(attempts=0)
            dispatch_job(EvaluationJob.objects.get(candidate__submission=submission).pk)
        queues = [c.kwargs["queue"] for c in app.send_task.call_args_list]
        assert queues == ["eval.H200", "eval.H200.low"]
        job = EvaluationJob.objects.get(candidate__submission=team)
        job_rerun(job=job, actor=UserFactory(is_staff=True))
    assert app.send_task.call_args_list[-1].kwargs["queue"] == "eval.H200.low"
    assert EvaluationJob.objects.get(pk=job.pk).low_priority


def test_a_team_job_is_not_placed_behind_a_baseline(dev_release: Release) -> None:
    with mock.patch("submissions.jobs.current_app.send_task"):
        baseline = honest_upload(dev_release)
        ours = honest_upload(dev_release)
    EvaluationJob.objects.filter(candidate__submission=baseline).update(low_priority=True)
    client = Client()
    client.force_login(member_of(ours.team, "quinn"))
    [job] = client.get(f"/api/submissions/{ours.pk}/").json()["jobs"]
    assert job["queue"]["position"] == 1 and job["queue"]["queued_ahead"] == 0
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    [low] = client.get(f"/api/submissions/{baseline.pk}/").json()["jobs"]
    assert low["queue"]["position"] == 2  # behind our team job, queued after it
