"""The "does not generalise" flag, one hidden shape at a time: each hidden shape beside its
public sibling (the public shape it is made from by changing one size), so that a kernel
cannot dodge the flag by falling back on one shape of two; the reason shown names the hidden
shape by its number only, the sibling by its id, with both figures."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.core.management import call_command
from django.test import Client

from evaluation.catalog.importing import release_import
from evaluation.catalog.models import HardwareProfile, Release
from evaluation.catalog.siblings import public_sibling
from evaluation.harness.roofline import roofline_point
from evaluation.release_tools.make_fixture_roofline import write_release_rooflines
from leaderboard.models import ScoreSummary, SubmissionScore
from leaderboard.scoring import (
    SCORE_FIELDS,
    ShapeOutcome,
    SubmissionSummary,
    combine,
    generalisation_note,
    generalisation_reason_text,
    summarise,
)
from leaderboard.selectors import board_rows, operator_board
from leaderboard.services import (
    rescore_submission,
    rescore_weight_set,
    weight_set_from_release,
)
from submissions.models import EvaluationJob
from submissions.services import submission_create
from tests.factories import TeamFactory, member_of
from tests.hidden_tier import report_job, shape_report, without_hold
from tests.paths import FIXTURE_RELEASE, SAMPLE_CANDIDATES


def _call(tokens: int | list[int], hidden: int = 4096, eps: float = 1e-6) -> dict[str, Any]:
    key = "seq_lens" if isinstance(tokens, list) else "num_tokens"
    return {"init_kwargs": {"eps": eps}, "input_kwargs": {key: tokens, "hidden_size": hidden}}


STARTER_LIKE = {
    "llama3.1-8b-decode-t1-h4096": _call(1), "llama3.1-8b-decode-t64-h4096": _call(64),
    "llama3.1-8b-prefill-t512-h4096": _call(512), "llama3.1-8b-prefill-t8192-h4096": _call(8192),
    "llama3.1-70b-decode-t64-h8192": _call(64, 8192),
    "qwen3-8b-decode-t64-h4096-eps5": _call(64, eps=1e-5),
}


def test_a_hidden_shapes_sibling_is_the_public_shape_it_differs_from_in_one_size() -> None:
    # a decode size drawn from 1..256: the decode shape of the same layer, nearest in tokens
    assert public_sibling("llama3.1-8b-decode-t40-h4096", _call(40), STARTER_LIKE) == \
        "llama3.1-8b-decode-t64-h4096"
    assert public_sibling("llama3.1-8b-decode-t3-h4096", _call(3), STARTER_LIKE) == \
        "llama3.1-8b-decode-t1-h4096"
    # a prefill size: a prefill shape, not the decode one of the same layer
    assert public_sibling("llama3.1-8b-prefill-t3072-h4096", _call(3072), STARTER_LIKE) == \
        "llama3.1-8b-prefill-t8192-h4096"
    # another layer, or other init arguments, is never the sibling while the layer has one
    assert public_sibling("llama3.1-70b-decode-t7-h8192", _call(7, 8192), STARTER_LIKE) == \
        "llama3.1-70b-decode-t64-h8192"
    # the choice does not depend on the order the shapes are read in
    reversed_order = dict(reversed(list(STARTER_LIKE.items())))
    assert public_sibling("llama3.1-8b-decode-t40-h4096", _call(40), reversed_order) == \
        "llama3.1-8b-decode-t64-h4096"
    assert public_sibling("x", _call(1), {}) is None


def _outcome(shape_id: str, floor: float, *, hidden: bool = False, verdict: str = "native",
             correct: bool = True, sibling: str | None = None) -> ShapeOutcome:
    return ShapeOutcome(operator="rms_norm", shape_id=shape_id, correct=correct,
                        verdict=verdict if correct else None, attainment=floor / 2,
                        attainment_se=0.0, attainment_with_floor=floor, hidden=hidden,
                        sibling=sibling)


PUBLIC = [_outcome("decode-t64", 0.90), _outcome("prefill-t8192", 0.80),
          _outcome("decode-t1", 0.95)]


def test_falling_back_on_one_of_two_hidden_shapes_is_flagged_with_the_reason() -> None:
    summary = summarise([*PUBLIC, _outcome("decode-t40", 0.88, hidden=True, sibling="decode-t64"),
                         _outcome("prefill-t3072", 0.3, hidden=True, verdict="fallback-torch",
                                  sibling="prefill-t8192")])
    score = combine(summary, {"rms_norm": 1.0})
    # the medians alone would not flag it: hidden median(0.88, 0) = 0.44, public 0.9 / 2 = 0.45
    assert score.generalisation == {"rms_norm": {"public": 0.9, "hidden": pytest.approx(0.44)}}
    assert score.not_generalising == ["rms_norm"]
    [reason] = score.generalisation_reasons["rms_norm"]
    assert reason == {"operator": "rms_norm", "hidden_shape": "hidden shape 2 of 2",
                      "public_shape": "prefill-t8192", "hidden": 0.0, "hidden_state": "fell back",
                      "public": 0.8, "public_state": "passed", "why": "fell back", "factor": 2.0}
    assert generalisation_reason_text(reason) == \
        "hidden shape 2 of 2 fell back (0); its public sibling prefill-t8192: 0.800"
    # what is stored reads back the same, and so scores the same
    stored = SubmissionSummary.from_json(json.loads(json.dumps(summary.as_json())))
    assert stored == summary and combine(stored, {"rms_norm": 1.0}) == score


def test_an_honest_kernel_is_not_flagged_and_a_slow_hidden_shape_is() -> None:
    honest = summarise([*PUBLIC, _outcome("decode-t40", 0.86, hidden=True, sibling="decode-t64"),
                        _outcome("prefill-t3072", 0.70, hidden=True, sibling="prefill-t8192")])
    assert combine(honest, {"rms_norm": 1.0}).not_generalising == []
    assert combine(honest, {"rms_norm": 1.0}).generalisation_reasons == {}
    # a hidden shape at less than half its sibling's a_floor, the other one fine
    slow = summarise([*PUBLIC, _outcome("decode-t40", 0.86, hidden=True, sibling="decode-t64"),
                      _outcome("prefill-t3072", 0.35, hidden=True, sibling="prefill-t8192")])
    score = combine(slow, {"rms_norm": 1.0})
    [reason] = score.generalisation_reasons["rms_norm"]
    assert score.not_generalising == ["rms_norm"] and reason["why"] == "below"
    assert generalisation_reason_text(reason) == \
        "hidden shape 2 of 2: 0.350, below 1/2 of its public sibling prefill-t8192: 0.800"
    # the release's factor decides: at 3 that shape is within it
    assert combine(slow, {"rms_norm": 1.0}, generalisation_factor=3.0).not_generalising == []


def test_a_hidden_shape_is_not_held_against_a_kernel_that_fails_its_sibling_too() -> None:
    failing = [_outcome("decode-t64", 0.0, correct=False), *PUBLIC[1:]]
    summary = summarise([*failing,
                         _outcome("decode-t40", 0.0, hidden=True, correct=False,
                                  sibling="decode-t64"),
                         _outcome("prefill-t3072", 0.75, hidden=True, sibling="prefill-t8192")])
    assert combine(summary, {"rms_norm": 1.0}).not_generalising == []
    # and a hidden shape its job never reported (cancelled during the hidden tier) is no dodge
    cancelled = ShapeOutcome(operator="rms_norm", shape_id="decode-t40", correct=False,
                             verdict=None, attainment=0.0, evaluated=False, hidden=True,
                             sibling="decode-t64")
    score = combine(summarise([*PUBLIC, cancelled]), {"rms_norm": 1.0})
    assert [r["why"] for r in score.generalisation_reasons["rms_norm"]] == ["not evaluated"]


def test_a_summary_stored_before_sibling_comparisons_keeps_the_medians_rule() -> None:
    summary = summarise([*PUBLIC, _outcome("prefill-t3072", 0.3, hidden=True,
                                           verdict="fallback-torch", sibling="prefill-t8192")])
    old = {k: v for k, v in summary.as_json().items() if k != "hidden_siblings"}
    stored = SubmissionSummary.from_json(old)
    assert stored.hidden_siblings is None
    score = combine(stored, {"rms_norm": 1.0})  # hidden median 0 < 0.9 / 2
    assert score.not_generalising == ["rms_norm"] and score.generalisation_reasons == {}


# Two hidden shapes of the fixture's rms_norm, each one size away from a public shape
HIDDEN_DECODE = "llama8b-decode-t20-h4096"
HIDDEN_PREFILL = "llama8b-prefill-t2048-h4096"
HIDDEN_SHAPES = {HIDDEN_DECODE: _call(20), HIDDEN_PREFILL: _call(2048)}


@pytest.fixture
def release(tmp_path: Path) -> Release:
    target = tmp_path / "atrex-fixture"
    shutil.copytree(FIXTURE_RELEASE, target)
    (target / "data" / "rms_norm" / "hidden_shapes.json").write_text(json.dumps(HIDDEN_SHAPES))
    write_release_rooflines(target)
    imported = release_import(path=target)
    weight_set_from_release(imported.release)
    return without_hold(imported.release)


def _evaluated(release: Release, team: str, hidden_verdicts: dict[str, str],
               capture: Any) -> EvaluationJob:
    """A ranked rms_norm submission whose every shape passed at attainment 0.5 on the H200,
    each hidden one with its verdict from `hidden_verdicts` (native by default)."""
    submission = submission_create(
        team=TeamFactory(name=team), user=None, release=release,
        hardware=HardwareProfile.objects.get(name="H200"), filename="rms_norm.py",
        data=(SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes())
    job = submission.candidates.get().job
    EvaluationJob.objects.filter(pk=job.pk).update(attempts=1)
    job.refresh_from_db()
    hardware = HardwareProfile.objects.get(name="H200").as_spec()
    rooflines = job.candidate.operator.hidden
    shapes = [shape_report(shape_id, median_s=roofline_point(
        rooflines.shape_roofline(shape_id), hardware).sol_s / 0.5,
        verdict=hidden_verdicts.get(shape_id, "native"))
        for shape_id in [*job.shape_ids, *job.hidden_shape_ids]]
    with mock.patch("submissions.jobs.current_app.send_task"):
        report_job(job, shapes)
    with capture(execute=False):
        rescore_submission(submission)
    return job


@pytest.mark.django_db
def test_a_submission_falling_back_on_one_of_two_hidden_shapes_says_why_everywhere(
        release: Release, settings: Any, django_capture_on_commit_callbacks: Any) -> None:
    settings.ATREX_SHAPE_FILTER = ""  # the scored tier, as on a GPU deployment
    honest = _evaluated(release, "Honest", {}, django_capture_on_commit_callbacks)
    assert honest.hidden_shape_ids == [HIDDEN_DECODE, HIDDEN_PREFILL]
    special = _evaluated(release, "Special", {HIDDEN_PREFILL: "fallback-torch"},
                         django_capture_on_commit_callbacks)
    weights = release.weight_sets.get(active=True)
    scores = {s.submission.team.name: s for s in SubmissionScore.objects.filter(
        weight_set=weights).select_related("submission__team")}
    assert scores["Honest"].not_generalising == [] and scores["Honest"].generalisation_reasons == {}
    assert scores["Special"].not_generalising == ["rms_norm"]
    [reason] = scores["Special"].generalisation_reasons["rms_norm"]
    assert (reason["hidden_shape"], reason["public_shape"], reason["why"], reason["hidden"]) == (
        "hidden shape 2 of 2", "llama8b-prefill-t4096-h4096", "fell back", 0.0)
    assert 0.5 < reason["public"] < 1  # the sibling's attainment 0.5 with the launch floor
    why = generalisation_reason_text(reason)
    hardware = HardwareProfile.objects.get(name="H200")
    badges = {r["team"]: r["badges"] for r in board_rows(
        release=release, hardware=hardware, weight_set=weights, all_submissions=True)}
    assert f"does not generalise: rms_norm (rms_norm: {why})" in badges["Special"]
    assert not any("generalise" in b for b in badges["Honest"])
    rows = {r["team"]: r for r in operator_board(release=release, hardware=hardware,
                                                 weight_set=weights, operator="rms_norm")["rows"]}
    assert rows["Special"]["generalisation_why"] == why and rows["Honest"]["generalisation_why"] == ""
    client = Client()
    op_page = client.get(f"/boards/{release.pk}/H200/operators/rms_norm/").content.decode()
    assert f'<small class="why">{why}</small>' in op_page
    client.force_login(member_of(special.candidate.submission.team, "sam"))
    page = client.get(f"/submissions/{special.candidate.submission_id}/").content.decode()
    assert "<li>rms_norm: hidden shape 2 of 2 fell back (0); its public sibling " \
           "llama8b-prefill-t4096-h4096: 0." in page
    api = client.get(f"/api/submissions/{special.candidate.submission_id}/").json()
    assert api["score"]["generalisation_reasons"]["rms_norm"][0]["why"] == "fell back"
    # never the hidden shapes' ids or sizes
    for body in (op_page, page, json.dumps(api), json.dumps(badges)):
        assert HIDDEN_DECODE not in body and HIDDEN_PREFILL not in body and "t2048" not in body
    # a summary stored before the siblings keeps the medians' rule (hidden median 0.5 of
    # the public: not flagged) until the summaries are rebuilt
    stored = ScoreSummary.objects.get(submission=special.candidate.submission)
    ScoreSummary.objects.filter(pk=stored.pk).update(summary={
        k: v for k, v in stored.summary.items() if k != "hidden_siblings"}, rescore_text="")
    rescore_weight_set(weights)
    assert SubmissionScore.objects.get(weight_set=weights, submission__team__name="Special"
                                       ).not_generalising == []
    call_command("rescore", release.name, "--rebuild-summaries", stdout=io.StringIO())
    assert SubmissionScore.objects.get(weight_set=weights, submission__team__name="Special"
                                       ).generalisation_reasons == {"rms_norm": [reason]}


@pytest.mark.django_db
def test_a_bulk_rescore_writes_the_rows_a_finished_job_does_from_the_kept_rescore_text(
        release: Release, settings: Any, django_capture_on_commit_callbacks: Any) -> None:
    """The bulk rescore reads each summary's rescore text (the weighted inputs and the hidden
    tier's columns, kept with the summary) instead of the whole summary: its rows must be
    those `combine` gives from the whole summary, as after a job, and a changed factor must
    not be served from the old text."""
    settings.ATREX_SHAPE_FILTER = ""
    _evaluated(release, "Honest", {}, django_capture_on_commit_callbacks)
    special = _evaluated(release, "Special", {HIDDEN_PREFILL: "fallback-torch"},
                         django_capture_on_commit_callbacks).candidate.submission
    weights = release.weight_sets.get(active=True)

    def rows() -> dict[int, dict[str, Any]]:
        return {s.submission_id: {f: getattr(s, f) for f in SCORE_FIELDS}
                for s in SubmissionScore.objects.filter(weight_set=weights)}

    after_jobs = rows()  # rescore_submission: combine over the whole summary
    assert after_jobs[special.pk]["not_generalising"] == ["rms_norm"]
    assert after_jobs[special.pk]["generalisation"]["rms_norm"]["hidden"] is not None
    rescore_weight_set(weights)
    assert rows() == after_jobs
    # an admin changes the factor: the kept text is written again, the reasons carry it
    Release.objects.filter(pk=release.pk).update(generalisation_factor=3.0)
    release.refresh_from_db()
    weights.refresh_from_db()
    rescore_weight_set(weights)
    [reason] = rows()[special.pk]["generalisation_reasons"]["rms_norm"]
    assert reason["factor"] == 3.0
    assert ScoreSummary.objects.get(submission=special).rescore_text.startswith("3.0\n")
    summary = SubmissionSummary.from_json(ScoreSummary.objects.get(submission=special).summary)
    assert rows()[special.pk]["generalisation_reasons"] == \
        combine(summary, weights.weights, generalisation_factor=3.0).generalisation_reasons


def test_a_boards_badge_names_three_hidden_shapes_and_counts_the_rest() -> None:
    """The why a board shows is kept with the score (SubmissionScore.generalisation_note): the
    first three hidden shapes, then how many more the submission's page lists."""
    def reason(number: int) -> dict[str, Any]:
        return {"hidden_shape": f"hidden shape {number} of 5", "public_shape": f"p{number}",
                "hidden": 0.0, "public": 0.5, "why": "failed", "factor": 2.0}

    reasons = {"gemm": [reason(1), reason(2)], "rms_norm": [reason(3), reason(4), reason(5)]}
    note = generalisation_note(reasons, ["gemm", "rms_norm"])
    assert note == (f" (gemm: {generalisation_reason_text(reason(1))}; "
                    f"gemm: {generalisation_reason_text(reason(2))}; "
                    f"rms_norm: {generalisation_reason_text(reason(3))}; "
                    "2 more on the submission's page)")
    assert generalisation_note({"gemm": [reason(1)]}, ["gemm"]) == \
        f" (gemm: {generalisation_reason_text(reason(1))})"
    assert generalisation_note({}, []) == "" and generalisation_note(None, ["gemm"]) == ""
