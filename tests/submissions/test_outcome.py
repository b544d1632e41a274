"""A submission's outcome: what happened, in shapes, the same on its page, the team page and
the API, whatever its jobs' status says; one way of printing scores that are not numbers;
the kernels that ran outside the candidate's own."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from evaluation.catalog.models import Release
from leaderboard.services import rescore_submission
from submissions.jobs import job_cancel, record_event
from submissions.models import ShapeResult, Submission
from submissions.selectors import JobTally, submission_outcome
from tests.builders import honest_upload
from tests.factories import member_of
from tests.pages import text
from tests.reports import DEV_SHAPES, checked_shape, finish

pytestmark = pytest.mark.django_db


def member(submission: Submission) -> Client:
    client = Client()
    user = submission.team.members.first() or member_of(submission.team, f"ruby{submission.pk}")
    client.force_login(user)
    return client


def api(submission: Submission) -> dict[str, Any]:
    detail: dict[str, Any] = member(submission).get(f"/api/submissions/{submission.pk}/").json()
    return detail


def page(submission: Submission, path: str | None = None) -> str:
    return member(submission).get(path or f"/submissions/{submission.pk}/").content.decode()


def test_a_submission_whose_every_shape_failed_is_failed_not_scored(dev_release: Release) -> None:
    submission = honest_upload(dev_release)
    finish(submission.candidates.get().job, *(checked_shape(s, passed=False) for s in DEV_SHAPES))
    detail = api(submission)
    assert detail["status"] == "scored"  # the jobs' status, kept for compatibility
    assert detail["outcome"] == {"status": "failed", "summary": "failed: 0 of 2 shapes correct",
                                 "shapes": 2, "evaluated": 2, "correct": 0, "native": 0,
                                 "interpreter": False, "check": False}
    html = page(submission)
    assert 'class="badge failed" id="submission-status">failed<' in html
    assert "0 of 2 shapes correct" in html and "badge scored" not in html.split("<h2>")[0]


def test_a_partly_correct_submission_is_scored_with_its_count_of_correct_shapes(
        dev_release: Release) -> None:
    submission = honest_upload(dev_release)
    finish(submission.candidates.get().job, checked_shape(DEV_SHAPES[0]), checked_shape(DEV_SHAPES[1], False))
    outcome = api(submission)["outcome"]
    assert outcome["status"] == "scored" and outcome["summary"] == "scored: 1 of 2 shapes correct"
    assert 'id="submission-status">scored<' in page(submission)


def test_correct_fallbacks_are_counted_apart_from_native_shapes(dev_release: Release) -> None:
    submission = honest_upload(dev_release)
    torch = {"verdict": "fallback-torch", "dsl_ratio": 0.0}
    finish(submission.candidates.get().job, *(checked_shape(s, adoption=torch) for s in DEV_SHAPES))
    assert api(submission)["outcome"]["summary"] == "scored: 2 of 2 shapes correct, 0 native"


def test_a_job_cancelled_before_any_shape_leaves_the_submission_cancelled(
        dev_release: Release) -> None:
    submission = honest_upload(dev_release)
    assert job_cancel(job=submission.candidates.get().job)
    outcome = api(submission)["outcome"]
    assert outcome["status"] == "cancelled"
    assert outcome["summary"] == "cancelled: 0 of 2 shapes correct, 2 not evaluated"


def test_an_infrastructure_failure_before_any_shape_is_lost_not_failed(dev_release: Release) -> None:
    submission = honest_upload(dev_release)
    job = submission.candidates.get().job
    record_event("failed", {"job_id": job.pk, "attempt": 1, "worker": "gpu-1", "run": "r1",
                            "reason": "HarnessError: child did not start", "infrastructure": True})
    outcome = api(submission)["outcome"]
    assert outcome["status"] == "lost" and outcome["summary"].startswith(
        "lost: 0 of 2 shapes correct, 2 not evaluated (infrastructure failure")


def test_while_jobs_run_the_outcome_counts_the_shapes_so_far(dev_release: Release) -> None:
    submission = honest_upload(dev_release, ("rms_norm", "silu_and_mul"))
    rms = submission.candidates.get(operator__name="rms_norm").job
    finish(rms, *(checked_shape(s, passed=False) for s in DEV_SHAPES))
    outcome = api(submission)["outcome"]
    assert outcome["status"] == "queued"  # silu_and_mul still waits: not failed yet
    assert outcome["summary"] == "queued: 2 of 4 shapes evaluated, 0 correct so far"


@pytest.mark.parametrize("jobs, status", [
    ([("scored", 2, 2, 0), ("failed", 2, 0, 0)], "failed"),  # every evaluated shape wrong
    ([("scored", 2, 2, 1), ("cancelled", 2, 0, 0)], "scored"),
    ([("cancelled", 2, 0, 0), ("cancelled", 2, 0, 0)], "cancelled"),
    ([("running", 2, 1, 1), ("scored", 2, 2, 2)], "running"),
    ([], "empty"),
])
def test_the_outcome_status_is_scored_only_when_a_shape_was_correct(
        jobs: list[tuple[str, int, int, int]], status: str) -> None:
    tallies = [JobTally(status=s, mode="gpu", infrastructure_failure=False, shapes=n,
                        evaluated=e, correct=c, native=c) for s, n, e, c in jobs]
    assert submission_outcome(tallies)["status"] == status


def test_the_team_page_shows_each_submissions_outcome_and_score(dev_release: Release) -> None:
    failed, timed, untimed = (honest_upload(dev_release) for _ in range(3))
    finish(failed.candidates.get().job, *(checked_shape(s, passed=False) for s in DEV_SHAPES))
    finish(timed.candidates.get().job, *(checked_shape(s, median_s=50e-6) for s in DEV_SHAPES))
    ShapeResult.objects.filter(job__candidate__submission=timed).update(attainment=0.5)
    finish(untimed.candidates.get().job, *(checked_shape(s) for s in DEV_SHAPES))
    waiting = honest_upload(dev_release)
    for submission in (failed, timed, untimed):
        rescore_submission(submission)
        team = submission.team
        Submission.objects.filter(team=team).update(team=failed.team)  # one team for the page
    Submission.objects.filter(pk=waiting.pk).update(team=failed.team)
    html = page(failed, "/team/")
    rows = {int(pk): text(row) for pk, row in
            re.findall(r'<tr><td><a href="/submissions/(\d+)/">(.*?)</tr>', html, re.S)}
    assert "failed 0 of 2 shapes correct" in rows[failed.pk] and " 0.000 " in rows[failed.pk]
    assert "scored 2 of 2 shapes correct" in rows[untimed.pk]
    assert " not timed " in rows[untimed.pk]  # correct, no GPU time: not 0
    score = re.search(r" (\d\.\d{3}) ", rows[timed.pk])  # 0.5 times rms_norm's weight
    assert score is not None and 0 < float(score.group(1)) < 0.5
    assert "queued 0 of 2 shapes evaluated" in rows[waiting.pk] and " – " in rows[waiting.pk]
    assert "<strong>not timed</strong> = correct, but no GPU" in html  # the legend


def test_the_submission_page_prints_untimed_results_as_not_timed_and_failures_as_zero(
        dev_release: Release) -> None:
    submission = honest_upload(dev_release)
    finish(submission.candidates.get().job, checked_shape(DEV_SHAPES[0]), checked_shape(DEV_SHAPES[1], False))
    rescore_submission(submission)
    html = page(submission)
    cells = {shape_id: text(row) for shape_id, row in
             re.findall(r"<tr><td>(dev-[\w-]+)</td>(.*?)</tr>", html, re.S)}
    assert cells[DEV_SHAPES[0]].count("not timed") == 2  # time and attainment
    assert " 0.000 " in cells[DEV_SHAPES[1]] and "not timed" not in cells[DEV_SHAPES[1]]
    assert "not measured" not in html
    # S_op: a shape without a time leaves the operator's median unknown, not 0.
    scores = text(html.split('id="scores"')[1].split("</table>")[0])
    # S_agg, the mean, memory-bound, prefill, decode: not timed. Compute-bound: 0, for the
    # release's compute-bound operators (gemm_fp16, ...) this submission left out count 0
    # there, and rms_norm has no compute-bound shape.
    cells = scores.split()[-10:]
    assert scores.count("not timed") == 5 and "–" not in scores
    assert re.findall(r"not timed|0\.000", scores) == ["not timed"] * 3 + ["0.000"] + [
        "not timed"] * 2, cells
    assert 'id="legend"' in html


def test_the_submission_page_names_the_kernels_that_ran_outside_the_candidates(
        dev_release: Release) -> None:
    submission = honest_upload(dev_release)
    vendor = {"verdict": "fallback-vendor", "dsl_ratio": 0.1, "method": "device-time",
              "foreign_kernels": [{"name": "nvjet_tst_128x64_64x4", "category": "vendor",
                                   "count": 2, "device_time_us": 11.5}],
              "aten_compute_ops": {"aten::mm": 2}}
    finish(submission.candidates.get().job, *(checked_shape(s, adoption=vendor, median_s=40e-6)
                                              for s in DEV_SHAPES))
    result = api(submission)["jobs"][0]["results"][0]
    assert result["foreign_kernels"] == [{"name": "nvjet_tst_128x64_64x4", "category": "vendor",
                                          "count": 2}]
    assert result["aten_compute_ops"] == {"aten::mm": 2}
    html = page(submission)
    assert html.count("Ran outside your kernels:") == 2
    assert "<code>nvjet_tst_128x64_64x4</code> (vendor, ×2)" in html
    assert "<code>aten::mm</code> ×2" in html


def test_the_schema_describes_the_outcome_and_the_fallback_evidence() -> None:
    schemas = Client().get("/api/schema/?format=json").json()["components"]["schemas"]
    outcome = schemas["OutcomeOut"]["properties"]
    assert {"status", "summary", "shapes", "evaluated", "correct", "native",
            "interpreter"} <= set(outcome)
    assert "outcome" in schemas["SubmissionOut"]["required"]
    assert {"foreign_kernels", "aten_compute_ops"} <= set(schemas["ResultOut"]["properties"])
    assert "mode" in schemas["JobOut"]["properties"]
