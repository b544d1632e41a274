"""Admin tools: re-run, review of suspicious results, hiding teams — all audited."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.test import Client

from leaderboard.services import rescore_submission, weight_set_activate
from portal.accounts.models import Team
from portal.audit.models import AuditEntry
from submissions.models import EvaluationJob, ShapeResult
from tests.factories import UserFactory
from tests.leaderboard.boards import WeighedWorld, board, build_weighed_world
from tests.world import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> WeighedWorld:
    return build_weighed_world()


@pytest.fixture
def admin_client(world: WeighedWorld) -> Client:
    return signed_in(world.root)


def test_rejecting_a_suspicious_result_scores_it_zero(world: WeighedWorld,
                                                     admin_client: Client,
                                                     django_capture_on_commit_callbacks: Any) -> None:
    result = ShapeResult.objects.filter(job__candidate__submission__team__name="Red").first()
    assert result is not None
    ShapeResult.objects.filter(pk=result.pk).update(suspicious=True, attainment=1.7)
    with mock.patch("submissions.jobs.current_app.send_task") as send, \
            django_capture_on_commit_callbacks(execute=True):
        admin_client.post("/admin/submissions/shaperesult/",
                          {"action": "reject_results", "_selected_action": [result.pk]})
    result.refresh_from_db()
    assert (result.status, result.attainment, result.suspicious) == ("failed", 0.0, False)
    entry = AuditEntry.objects.get(action="result.reject")
    assert entry.before["attainment"] == 1.7 and entry.actor.username == "root"
    assert send.call_args.args[0] == "leaderboard.rescore_submission"


def test_accepting_keeps_the_measurement(world: WeighedWorld,
                                         admin_client: Client) -> None:
    result = ShapeResult.objects.first()
    assert result is not None
    ShapeResult.objects.filter(pk=result.pk).update(suspicious=True)
    with mock.patch("submissions.jobs.current_app.send_task"):
        admin_client.post("/admin/submissions/shaperesult/",
                          {"action": "accept_results", "_selected_action": [result.pk]})
    result.refresh_from_db()
    assert not result.suspicious and result.status == "passed"
    assert AuditEntry.objects.filter(action="result.accept").count() == 1


def test_rerun_starts_a_new_attempt_without_quota(world: WeighedWorld,
                                                  admin_client: Client,
                                                  django_capture_on_commit_callbacks: Any) -> None:
    job = EvaluationJob.objects.first()
    assert job is not None and job.attempts == 1
    with mock.patch("submissions.jobs.current_app.send_task") as send, \
            django_capture_on_commit_callbacks(execute=True):
        admin_client.post("/admin/submissions/evaluationjob/",
                          {"action": "rerun_jobs", "_selected_action": [job.pk]})
    job.refresh_from_db()
    assert job.status == "queued" and job.attempts == 2
    spec = send.call_args.kwargs["args"][0]
    # an admin's re-run waits behind the teams' jobs (the hardware's low-priority queue)
    assert send.call_args.kwargs["queue"] == "eval.H200.low" and spec["attempt"] == 2
    assert AuditEntry.objects.filter(action="job.rerun").count() == 1


def test_a_hidden_team_leaves_the_public_board(world: WeighedWorld,
                                               admin_client: Client) -> None:
    weight_set_activate(weight_set=world.norm_only, actor=None)
    red = Team.objects.get(name="Red")
    admin_client.post("/admin/accounts/team/", {"action": "hide_teams",
                                                "_selected_action": [red.pk]})
    assert board(world.release) == [("Blue", 0.2)]
    assert AuditEntry.objects.get(action="team.hide").after == {"hidden": True}
    for submission in red.submissions.all():
        rescore_submission(submission)  # hiding changes visibility, not scores
    assert board(world.release) == [("Blue", 0.2)]


def test_the_quarantine_page_shows_the_evidence_and_records_decisions(
        world: WeighedWorld, admin_client: Client,
        django_capture_on_commit_callbacks: Any) -> None:
    result = ShapeResult.objects.filter(job__candidate__submission__team__name="Blue").first()
    assert result is not None
    ShapeResult.objects.filter(pk=result.pk).update(
        suspicious=True, attainment=3.2, median_s=1e-6, sol_s=3.2e-6, samples=400,
        launch_method="graph", verdict="native", dsl_ratio=1.0, wall_time_s=0.4e-6,
        raw={"adoption": {"dsl_kernels": ["_rms_norm_kernel"],
                          "foreign_kernels": [{"name": "memcpy32_post", "category": "torch"}]},
             "timing": {"wall_median_s": 0.4e-6}})
    page = admin_client.get("/staff/quarantine/").content.decode()
    assert f"#{result.pk}" in page and "Blue" in page
    assert "attainment 3.20 &gt; 1: faster than the hardware&#x27;s speed of light" in page
    assert "the wall time of a call is less than half its scored device span" in page
    assert "_rms_norm_kernel (own)" in page and "memcpy32_post (torch)" in page
    plain = Client()
    plain.force_login(UserFactory(username="plain"))
    assert plain.get("/staff/quarantine/").status_code == 302  # to the admin sign-in
    assert plain.post("/staff/quarantine/", {"result": result.pk, "decision": "accept"}
                      ).status_code == 302
    result.refresh_from_db()
    assert result.suspicious  # nothing decided by a non-admin
    with mock.patch("submissions.jobs.current_app.send_task") as send, \
            django_capture_on_commit_callbacks(execute=True):
        admin_client.post("/staff/quarantine/", {"result": result.pk, "decision": "reject"})
    result.refresh_from_db()
    assert (result.status, result.attainment, result.suspicious) == ("failed", 0.0, False)
    assert send.call_args.args[0] == "leaderboard.rescore_submission"
    page = admin_client.get("/staff/quarantine/").content.decode()
    assert "rejected by root" in page


def test_a_rerun_says_what_it_queued_and_a_second_click_queues_nothing(
        world: WeighedWorld, admin_client: Client,
        django_capture_on_commit_callbacks: Any) -> None:
    job = EvaluationJob.objects.first()
    assert job is not None
    action = {"action": "rerun_jobs", "_selected_action": [job.pk]}
    with mock.patch("submissions.jobs.current_app.send_task") as send, \
            django_capture_on_commit_callbacks(execute=True):
        first = admin_client.post("/admin/submissions/evaluationjob/", action, follow=True)
        second = admin_client.post("/admin/submissions/evaluationjob/", action, follow=True)
    said = [str(m) for m in first.context["messages"]]
    assert said == [f"Re-run queued for 1 job (jobs {job.pk}): new attempts on the low-priority "
                    "queue, after the teams' jobs; the boards leave those submissions out "
                    "until they end."]
    again = [str(m) for m in second.context["messages"]]
    assert again == [f"1 job ({job.pk}) re-run in the last 10 minutes and still queued: left "
                     "as they are, not re-run twice."]
    job.refresh_from_db()
    sent = [c.kwargs["args"][0]["attempt"] for c in send.call_args_list
            if isinstance(c.kwargs["args"][0], dict) and "attempt" in c.kwargs["args"][0]]
    assert job.attempts == 2 and sent == [2]  # one new attempt sent, not two
    assert AuditEntry.objects.filter(action="job.rerun").count() == 1


def test_the_admin_submission_list_shows_each_submissions_jobs_by_status(
        world: WeighedWorld, admin_client: Client) -> None:
    submission = EvaluationJob.objects.select_related("candidate__submission").first()
    assert submission is not None
    jobs = EvaluationJob.objects.filter(candidate__submission=submission.candidate.submission)
    jobs.update(status="scored")
    first = jobs.order_by("pk").first()
    assert first is not None
    EvaluationJob.objects.filter(pk=first.pk).update(status="running")
    page = admin_client.get("/admin/submissions/submission/").content.decode()
    assert "<th scope=\"col\" class=\"column-jobs_status\">" in page
    expected = f"1 running, {jobs.count() - 1} scored" if jobs.count() > 1 else "1 running"
    assert f'<td class="field-jobs_status">{expected}</td>' in page
