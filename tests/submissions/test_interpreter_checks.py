"""Results from Triton's CPU interpreter are a check, not a verdict on the kernel: marked as
such with the interpreter's known limits, and not counted against the daily quota."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.test import Client

from evaluation.catalog.models import Release
from leaderboard.models import SubmissionScore
from leaderboard.services import rescore_submission
from submissions.jobs import job_cancel, job_rerun, record_event
from submissions.models import EvaluationJob, ShapeResult, Submission
from submissions.services import quota_status
from tests.builders import honest_upload
from tests.factories import TeamFactory, UserFactory, member_of
from tests.reports import DEV_SHAPES, checked_shape, finish

pytestmark = pytest.mark.django_db

INTERPRETER = "cpu-interpreter"


def started(job: EvaluationJob, mode: str | None, run: str = "r1") -> None:
    payload: dict[str, Any] = {"job_id": job.pk, "attempt": job.attempts, "worker": "cpu-1",
                               "run": run}
    record_event("started", payload if mode is None else {**payload, "mode": mode})


def test_the_job_keeps_the_mode_its_worker_reports(dev_release: Release) -> None:
    job = honest_upload(dev_release).candidates.get().job
    assert job.mode == ""  # not reported yet
    started(job, INTERPRETER)
    job.refresh_from_db()
    assert job.mode == INTERPRETER and job.status == "running"
    finish(job, *(checked_shape(s) for s in DEV_SHAPES), mode=INTERPRETER)
    job.refresh_from_db()
    assert job.mode == INTERPRETER and job.status == "scored"


def test_a_worker_that_does_not_say_leaves_the_mode_to_its_result(dev_release: Release) -> None:
    job = honest_upload(dev_release).candidates.get().job
    started(job, None)
    job.refresh_from_db()
    assert job.mode == ""
    finish(job, *(checked_shape(s) for s in DEV_SHAPES), mode="gpu")
    job.refresh_from_db()
    assert job.mode == "gpu"


def test_a_rerun_forgets_the_mode_until_its_new_worker_reports(dev_release: Release) -> None:
    job = honest_upload(dev_release).candidates.get().job
    finish(job, *(checked_shape(s) for s in DEV_SHAPES), mode=INTERPRETER)
    job_rerun(job=job, actor=UserFactory(username="root", is_staff=True))
    job.refresh_from_db()
    assert job.attempts == 2 and job.mode == ""


def test_an_interpreter_run_is_marked_as_a_check_with_the_interpreters_limits(
        dev_release: Release) -> None:
    submission = honest_upload(dev_release)
    finish(submission.candidates.get().job, *(checked_shape(s) for s in DEV_SHAPES), mode=INTERPRETER)
    client = Client()
    client.force_login(member_of(submission.team, "ruby"))
    detail = client.get(f"/api/submissions/{submission.pk}/").json()
    assert detail["outcome"]["interpreter"] is True and detail["jobs"][0]["mode"] == INTERPRETER
    assert detail["outcome"]["summary"] == "scored: 2 of 2 shapes correct (interpreter check)"
    html = client.get(f"/submissions/{submission.pk}/").content.decode()
    notice = html.split('id="interpreter-notice"')[1].split("</div>")[0]
    assert "not a verdict on the kernel" in notice
    assert "Times are not measured" in notice and "never enter the boards" in notice
    assert "5424" in notice and "bf16" in notice  # the interpreter's known wrong results
    assert "<code>dev-*</code> shapes only" in notice
    assert html.count('class="badge interpreter">interpreter check<') == 2  # status, job


def test_a_gpu_run_carries_no_interpreter_mark(dev_release: Release) -> None:
    submission = honest_upload(dev_release)
    finish(submission.candidates.get().job, *(checked_shape(s, median_s=5e-6) for s in DEV_SHAPES))
    client = Client()
    client.force_login(member_of(submission.team, "ruby"))
    html = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "interpreter" not in html


def test_interpreter_checks_do_not_count_against_the_daily_quota(dev_release: Release) -> None:
    team = TeamFactory(daily_submission_quota=5, concurrent_job_quota=10)

    def upload() -> Submission:
        submission = honest_upload(dev_release)
        Submission.objects.filter(pk=submission.pk).update(team=team)
        return submission

    checked, measured, cancelled, waiting = upload(), upload(), upload(), upload()
    assert quota_status(team).used_today == 4  # counted from the upload on
    finish(checked.candidates.get().job, *(checked_shape(s) for s in DEV_SHAPES), mode=INTERPRETER)
    finish(measured.candidates.get().job, *(checked_shape(s, median_s=5e-6) for s in DEV_SHAPES))
    job_cancel(job=cancelled.candidates.get().job)  # a cancelled submission still counts
    assert quota_status(team).used_today == 3
    started(waiting.candidates.get().job, INTERPRETER)  # known as soon as its worker starts
    assert quota_status(team).used_today == 2
    assert quota_status(team).active == 1  # still evaluated: the concurrent limit holds


def test_jobs_stored_before_workers_reported_their_mode_get_it_from_their_results(
        dev_release: Release) -> None:
    from django.apps import apps

    backfill = importlib.import_module("submissions.migrations.0005_evaluationjob_mode")
    rescore = importlib.import_module("leaderboard.migrations.0004_score_interpreter_jobs")
    checked, measured = honest_upload(dev_release), honest_upload(dev_release)
    finish(checked.candidates.get().job, *(checked_shape(s) for s in DEV_SHAPES), mode=INTERPRETER)
    finish(measured.candidates.get().job, *(checked_shape(s, median_s=5e-6) for s in DEV_SHAPES))
    ShapeResult.objects.filter(job__candidate__submission=checked).update(raw={
        "timing": {"measured": False, "reason": "not measured: no GPU (CPU interpreter mode)"}})
    for submission in (checked, measured):
        rescore_submission(submission)
    EvaluationJob.objects.update(mode="")  # as stored before this field existed
    SubmissionScore.objects.update(interpreter_jobs=0)
    backfill.mode_from_stored_results(apps, None)
    rescore.mark_interpreter_checks(apps, None)
    assert checked.candidates.get().job.mode == INTERPRETER
    assert measured.candidates.get().job.mode == ""
    assert SubmissionScore.objects.get(submission=checked).interpreter_jobs == 1
    assert SubmissionScore.objects.get(submission=measured).interpreter_jobs == 0


def test_an_interpreter_check_in_check_mode_says_it_used_no_quota(dev_release: Release) -> None:
    submission = honest_upload(dev_release)
    Submission.objects.filter(pk=submission.pk).update(mode=Submission.Mode.CHECK)
    finish(submission.candidates.get().job, *(checked_shape(s) for s in DEV_SHAPES),
           mode=INTERPRETER)
    client = Client()
    client.force_login(member_of(submission.team, "ruby"))
    html = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "An interpreter check (no GPU) counts against no quota." in html
    assert "daily check quota" not in html
    assert quota_status(submission.team).checks_today == 0


def test_an_admins_rerun_holds_none_of_the_teams_concurrent_slots(dev_release: Release) -> None:
    submission = honest_upload(dev_release)
    job = submission.candidates.get().job
    finish(job, *(checked_shape(s, median_s=5e-6) for s in DEV_SHAPES))
    assert quota_status(submission.team).active == 0
    job_rerun(job=job, actor=UserFactory(is_staff=True))
    job.refresh_from_db()
    assert job.status == EvaluationJob.Status.QUEUED and job.low_priority
    assert quota_status(submission.team).active == 0  # the portal's work, not the team's
