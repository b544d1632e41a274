"""The hidden shape tier as a team meets it: its ranked jobs run the release's hidden shapes
after the public ones, apart from the shapes.json its candidate reads; the team learns how
many there are and how its kernel did on them, never which they are; a candidate that only
works on the shapes it could see is flagged "does not generalise", and an admin may take it
off the ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.test import Client

from evaluation.catalog.importing import release_import
from evaluation.catalog.models import HardwareProfile, Release, Shape
from evaluation.catalog.selectors import bundle_zip, operators_public
from evaluation.harness.evaluate import EvaluationSettings
from evaluation.harness.roofline import roofline_point
from evaluation.worker.jobs import run_job_spec
from leaderboard.models import SubmissionScore
from leaderboard.selectors import board_rows, operator_board
from leaderboard.services import rescore_submission, weight_set_from_release
from portal.audit.models import AuditEntry
from submissions.jobs import HIDDEN_FAILURE, RESCORE_TASK, dispatch_job, record_event
from submissions.models import EvaluationJob, ShapeResult, Submission
from submissions.services import submission_create, submission_set_ranking_excluded
from tests.factories import TeamFactory, member_of
from tests.hidden_tier import (
    HIDDEN_DEV,
    HIDDEN_SCORED,
    HIDDEN_WORDS,
    hidden_tier_release,
    report_job,
    shape_report,
    without_hold,
)
from tests.paths import SAMPLE_CANDIDATES

pytestmark = pytest.mark.django_db

NATIVE = (SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes()


@pytest.fixture
def release(tmp_path: Path) -> Release:
    imported = release_import(path=hidden_tier_release(tmp_path))
    assert imported.hidden_shapes == 2
    weight_set_from_release(imported.release)
    return without_hold(imported.release)


def submit(release: Release, team: Any = None, *, mode: str = "ranked",
           data: bytes = NATIVE) -> EvaluationJob:
    submission = submission_create(team=team or TeamFactory(), user=None, release=release,
                                   hardware=HardwareProfile.objects.get(name="H200"),
                                   filename="rms_norm.py", data=data, mode=mode)
    return submission.candidates.get().job


def assert_no_hidden_word(body: bytes, where: str) -> None:
    leaks = [word for word in HIDDEN_WORDS if word.encode() in body]
    assert not leaks, f"{where}: {leaks}"


def test_the_hidden_tier_is_stored_apart_from_every_public_read(release: Release) -> None:
    assert Shape.objects.filter(operator__release=release).count() == 45  # the public tier
    assert set(Shape.every_tier.filter(hidden=True).values_list("shape_id", flat=True)) == {
        HIDDEN_DEV, HIDDEN_SCORED}
    rms_norm = release.operators.get(name="rms_norm")
    assert HIDDEN_DEV not in rms_norm.shapes.values_list("shape_id", flat=True)
    assert HIDDEN_DEV not in rms_norm.shapes_json
    counts = {op.name: op.shape_count for op in operators_public(release)}
    assert counts["rms_norm"] == len(json.loads(rms_norm.shapes_json))
    assert_no_hidden_word(bundle_zip(release), "the release bundle")


def test_a_ranked_job_runs_the_hidden_shapes_last_and_never_in_the_candidates_shapes_json(
        release: Release, settings: Any, django_capture_on_commit_callbacks: Any) -> None:
    """The real worker path in Triton's interpreter, reports stored by the results consumer."""
    settings.ATREX_SHAPE_FILTER = "dev-*"
    team = TeamFactory()
    check = submit(release, team, mode="check")
    assert check.hidden_shape_ids == [] and check.shapes_total == 2  # a check: public only
    job = submit(release, team)
    assert job.shape_ids == ["dev-t4-h256", "dev-t3-h200"]
    assert job.hidden_shape_ids == [HIDDEN_DEV] and job.shapes_total == 3
    with mock.patch("submissions.jobs.current_app.send_task") as send:
        dispatch_job(job.pk)
    spec = send.call_args.kwargs["args"][0]
    assert HIDDEN_DEV not in spec["operator"]["shapes_json"]  # the child's copy of shapes.json
    assert list(json.loads(spec["operator"]["hidden_shapes_json"])) == [HIDDEN_DEV]
    events: list[tuple[str, dict[str, Any]]] = []

    def publish(kind: str, payload: dict[str, Any]) -> None:
        events.append((kind, payload))
        record_event(kind, json.loads(json.dumps(payload)))

    with mock.patch("submissions.jobs.current_app.send_task"):
        run_job_spec(spec, publish, EvaluationSettings(device="cpu"))
    reported = [p["shape"]["shape_id"] for kind, p in events if kind == "progress"]
    assert reported == ["dev-t4-h256", "dev-t3-h200", HIDDEN_DEV]  # after every public shape
    job.refresh_from_db()
    assert job.status == "scored" and job.shapes_done == 3
    assert ShapeResult.objects.filter(job=job).count() == 2  # what pages and the API read
    hidden = ShapeResult.every_tier.get(job=job, shape__shape_id=HIDDEN_DEV)
    assert hidden.status == "passed"
    with django_capture_on_commit_callbacks(execute=False):
        rescore_submission(job.candidate.submission)
    client = Client()
    client.force_login(member_of(team, "owner"))
    page = client.get(f"/submissions/{job.candidate.submission_id}/")
    text = page.content.decode()
    assert "3 shapes (1 of them hidden)" in text
    assert "Hidden shapes: 1 of 1 evaluated, 1 passed" in text
    api = client.get(f"/api/submissions/{job.candidate.submission_id}/").json()
    assert api["jobs"][0]["hidden_shapes"] == {"shapes": 1, "evaluated": 1, "passed": 1,
                                             "held": False}
    assert [r["shape_id"] for r in api["jobs"][0]["results"]] == ["dev-t4-h256", "dev-t3-h200"]
    assert api["outcome"]["shapes"] == 2  # the outcome counts what the team can see
    for body, where in ((page.content, "page"), (json.dumps(api).encode(), "API")):
        assert_no_hidden_word(body, where)


def test_what_a_hidden_shape_failure_says_never_reaches_the_team(release: Release,
                                                                  settings: Any) -> None:
    settings.ATREX_SHAPE_FILTER = "dev-*"
    team = TeamFactory()
    job = submit(release, team)
    EvaluationJob.objects.filter(pk=job.pk).update(attempts=1)
    job.refresh_from_db()
    candid = f"RuntimeError: no kernel for torch.Size([5, 328]) ({HIDDEN_DEV})"
    with mock.patch("submissions.jobs.current_app.send_task"):
        report_job(job, [shape_report("dev-t4-h256", median_s=1e-5),
                         shape_report("dev-t3-h200", median_s=1e-5),
                         shape_report(HIDDEN_DEV, error=candid)],
                   failed=f"the child died while it ran {HIDDEN_DEV}")
    job.refresh_from_db()
    assert job.status == "failed" and job.error == HIDDEN_FAILURE
    assert HIDDEN_DEV in job.hidden_error  # kept for the admins
    assert ShapeResult.every_tier.get(job=job, shape__hidden=True).error == candid
    client = Client()
    client.force_login(member_of(team, "owner"))
    for url in (f"/submissions/{job.candidate.submission_id}/",
                f"/api/submissions/{job.candidate.submission_id}/",
                f"/api/submissions/{job.candidate.submission_id}/profile/", "/team/"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert_no_hidden_word(response.content, url)
    assert "failed while it ran the release&#x27;s hidden shapes" in client.get(
        f"/submissions/{job.candidate.submission_id}/").content.decode()


def test_a_failure_during_the_public_shapes_is_shown_as_it_came(release: Release,
                                                                 settings: Any) -> None:
    settings.ATREX_SHAPE_FILTER = "dev-*"
    job = submit(release)
    EvaluationJob.objects.filter(pk=job.pk).update(attempts=1)
    job.refresh_from_db()
    with mock.patch("submissions.jobs.current_app.send_task"):
        report_job(job, [shape_report("dev-t4-h256", median_s=1e-5)],
                   failed="the sandboxed child was killed: out of memory")
    job.refresh_from_db()
    assert job.error == "the sandboxed child was killed: out of memory" and not job.hidden_error


def reported_at(job: EvaluationJob, attainment: float, *,
                hidden: str = "native") -> list[dict[str, Any]]:
    """Every shape of the job passed at `attainment` on the H200 (its median set from the
    shape's SOL); the hidden ones with verdict `hidden` ("fallback-torch": scores 0)."""
    operator = job.candidate.operator
    hardware = HardwareProfile.objects.get(name="H200").as_spec()
    shapes = []
    for shape_id in [*job.shape_ids, *job.hidden_shape_ids]:
        sol = roofline_point(operator.hidden.shape_roofline(shape_id), hardware).sol_s
        shapes.append(shape_report(shape_id, median_s=sol / attainment,
                                   verdict=hidden if shape_id in job.hidden_shape_ids
                                   else "native"))
    return shapes


def test_a_candidate_that_special_cases_the_public_shapes_is_flagged_and_an_admin_may_exclude_it(
        release: Release, settings: Any, django_capture_on_commit_callbacks: Any) -> None:
    settings.ATREX_SHAPE_FILTER = ""  # the scored tier, as on a GPU deployment
    honest, special = submit(release, TeamFactory(name="Honest")), \
        submit(release, TeamFactory(name="Special"))
    assert honest.hidden_shape_ids == [HIDDEN_SCORED]  # the dev-sized hidden shape is dev tier
    for job, hidden in ((honest, "native"), (special, "fallback-torch")):
        EvaluationJob.objects.filter(pk=job.pk).update(attempts=1)
        job.refresh_from_db()
        with mock.patch("submissions.jobs.current_app.send_task"):
            report_job(job, reported_at(job, 0.5, hidden=hidden))
        with django_capture_on_commit_callbacks(execute=False):
            rescore_submission(job.candidate.submission)
    weights = release.weight_sets.get(active=True)
    hardware = HardwareProfile.objects.get(name="H200")
    scores = {s.submission.team.name: s for s in SubmissionScore.objects.filter(
        weight_set=weights).select_related("submission__team")}
    assert scores["Honest"].by_operator["rms_norm"] == pytest.approx(0.5)
    assert scores["Special"].by_operator["rms_norm"] == pytest.approx(0.5)  # public: the same
    assert scores["Honest"].hidden_by_operator == {"rms_norm": pytest.approx(0.5)}
    assert scores["Special"].hidden_by_operator == {"rms_norm": 0.0}
    assert scores["Special"].not_generalising == ["rms_norm"]
    assert scores["Honest"].not_generalising == []
    board = operator_board(release=release, hardware=hardware, weight_set=weights,
                           operator="rms_norm")
    rows = {row["team"]: row for row in board["rows"]}
    assert board["hidden_shapes"] == 1
    # equal public scores: a tie, and the flag beside it
    assert rows["Special"]["badges"] == ["does not generalise", "tie"]
    assert rows["Special"]["hidden_score"] == 0.0 and rows["Special"]["rank"] == 1
    assert rows["Honest"]["badges"] == ["tie"]
    page = Client().get(f"/boards/{release.pk}/H200/operators/rms_norm/").content.decode()
    assert "S_op, hidden" in page and "does not generalise" in page
    assert_no_hidden_word(page.encode(), "the operator board")

    special_submission = special.candidate.submission

    def exclude(excluded: bool, reason: str) -> None:
        """The admin's action, then the rescore it asks for (the results worker's task)."""
        with mock.patch("submissions.jobs.current_app.send_task") as send, \
                django_capture_on_commit_callbacks(execute=True):
            submission_set_ranking_excluded(submission=special_submission, excluded=excluded,
                                            reason=reason, actor=None)
        assert send.call_args.args[0] == RESCORE_TASK
        rescore_submission(Submission.objects.get(pk=special_submission.pk))

    exclude(True, "does not generalise")
    assert AuditEntry.objects.filter(action="submission.exclude",
                                     target=f"submission:{special_submission.pk}").exists()
    rows_now = {row["team"]: row for row in board_rows(
        release=release, hardware=hardware, weight_set=weights, all_submissions=True)}
    assert rows_now["Special"]["rank"] is None
    assert "excluded by an admin: does not generalise: not ranked" in rows_now["Special"]["badges"]
    assert rows_now["Honest"]["rank"] == 1
    assert [r["team"] for r in board_rows(release=release, hardware=hardware,
                                          weight_set=weights)] == ["Honest"]
    exclude(False, "")
    assert Submission.objects.get(pk=special_submission.pk).ranking_excluded is False
    assert {r["team"] for r in board_rows(release=release, hardware=hardware,
                                          weight_set=weights)} == {"Honest", "Special"}
