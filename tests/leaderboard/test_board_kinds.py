"""Regime and phase boards, baseline rows, the fallback policy, freezing, paging, analysis."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evaluation.catalog.models import HardwareProfile, OperatorHidden, Release, Shape
from evaluation.harness.release import ShapeRoofline
from evaluation.harness.roofline import sol_seconds
from leaderboard.baselines import production_baseline
from leaderboard.models import ScoreSummary, SubmissionScore
from leaderboard.outcomes import shape_regime
from leaderboard.services import (
    rescore_submission,
    rescore_weight_set,
    summaries_rebuild,
    weight_set_activate,
    weight_set_create,
)
from portal.audit.models import AuditEntry
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from tests.factories import TeamFactory, UserFactory, member_of

pytestmark = pytest.mark.django_db

Value = float | Callable[[str], float]  # an attainment, or one per shape regime


def submit(release: Release, team: str, attainment: dict[str, Value], *, verdict: str = "native",
           baseline: str = "", output_tokens: int | None = None) -> Submission:
    """A scored submission; `attainment[op]` may be a function of the shape's regime."""
    hardware = HardwareProfile.objects.get(name="H200")
    submission = Submission.objects.create(team=TeamFactory(name=team) if isinstance(team, str)
                                           else team, release=release, hardware=hardware,
                                           baseline=baseline, output_tokens=output_tokens)
    for name, value in attainment.items():
        op = release.operators.select_related("hidden").get(name=name)
        candidate = Candidate.objects.create(submission=submission, operator=op, source="",
                                             sha256="0" * 64)
        job = EvaluationJob.objects.create(candidate=candidate, status="scored", attempts=1)
        for shape in Shape.objects.filter(operator=op):
            a = value(shape_regime(op, shape.shape_id, hardware) or "") if callable(value) \
                else value
            ShapeResult.objects.create(job=job, attempt=1, shape=shape, status="passed",
                                       verdict=verdict, attainment=a, raw={})
    return submission


def by_regime(memory: float, compute: float) -> Callable[[str], float]:
    return lambda regime: memory if regime == "memory" else compute


def activate(release: Release, weights: dict[str, float]) -> Any:
    weight_set = weight_set_create(release=release, weights=weights, source="manual")
    weight_set_activate(weight_set=weight_set, actor=None)
    return weight_set


def ranking(release: Release, board: str = "", **params: str) -> list[tuple[str, float]]:
    path = f"/api/boards/{release.pk}/H200/" + (f"{board}/" if board else "")
    rows = Client().get(path, params).json()["rows"]
    key = board or "aggregate"
    return [(r["team"], round(r[key], 6)) for r in rows]


def test_regime_boards_rank_by_the_shapes_of_their_regime(release: Release) -> None:
    # gemm_fp16's scored tier on H200: 3 memory-bound shapes (decode), 3 compute-bound
    # (prefill GEMMs); its 2 dev shapes are not scored.
    submit(release, "Red", {"gemm_fp16": by_regime(memory=0.9, compute=0.2)})
    submit(release, "Blue", {"gemm_fp16": by_regime(memory=0.3, compute=0.6)})
    activate(release, {"gemm_fp16": 1})
    # Aggregate: medians of [0.2 x3, 0.9 x3] = 0.55 and [0.3 x3, 0.6 x3] = 0.45.
    assert ranking(release) == [("Red", 0.55), ("Blue", 0.45)]
    assert ranking(release, "memory") == [("Red", 0.9), ("Blue", 0.3)]
    assert ranking(release, "compute") == [("Blue", 0.6), ("Red", 0.2)]
    page = Client().get(f"/boards/{release.pk}/H200/compute/").content.decode()
    assert "Compute-bound shapes" in page
    assert re.findall(r'<tr><td data-label="Rank">(\d)</td><td data-label="Team">(\w+)</td>',
                      page) == [("1", "Blue"), ("2", "Red")]
    assert Client().get(f"/boards/{release.pk}/H200/sideways/").status_code == 404


def test_phase_boards_use_the_operators_phases(release: Release) -> None:
    # causal_attention is prefill only; rms_norm serves both phases.
    submit(release, "Red", {"rms_norm": 0.5, "causal_attention": 0.2})
    submit(release, "Blue", {"rms_norm": 0.4, "causal_attention": 0.9})
    activate(release, {"rms_norm": 1, "causal_attention": 1})
    assert ranking(release) == [("Blue", 0.65), ("Red", 0.35)]
    assert ranking(release, "prefill") == [("Blue", 0.65), ("Red", 0.35)]
    assert ranking(release, "decode") == [("Red", 0.5), ("Blue", 0.4)]


def test_baselines_are_shown_beside_the_board_and_never_ranked(release: Release) -> None:
    submit(release, "Red", {"rms_norm": 0.6})
    system = TeamFactory(name="Portal baselines")
    submit(release, system, {"rms_norm": 0.3}, verdict="fallback-torch", baseline="pytorch")
    submit(release, system, {"rms_norm": 0.45}, verdict="fallback-compiled",
           baseline="torch_compile")
    activate(release, {"rms_norm": 1})
    data = Client().get(f"/api/boards/{release.pk}/H200/").json()
    assert [r["team"] for r in data["rows"]] == ["Red"]
    # A baseline is PyTorch by design: it shows its attainment whatever the fallback policy.
    assert [(b["team"], b["rank"], b["aggregate"]) for b in data["baselines"]] == [
        ("PyTorch reference", None, 0.3), ("torch.compile reference", None, 0.45)]
    page = Client().get(f"/boards/{release.pk}/H200/").content.decode()
    assert "Baselines (not ranked)" in page and "torch.compile reference" in page
    csv_rows = list(csv.DictReader(io.StringIO(Client().get(
        f"/api/boards/{release.pk}/H200/?format=csv").content.decode())))
    # results stored without timing samples: no interval, and every row says so
    assert [(r["rank"], r["team"], r["badges"]) for r in csv_rows] == [
        ("1", "Red", "no interval"), ("", "PyTorch reference", "baseline; no interval"),
        ("", "torch.compile reference", "baseline; no interval")]


def test_production_timings_make_a_baseline_row_where_the_hardware_matches(
        release: Release) -> None:
    hardware = HardwareProfile.objects.get(name="H200")
    hidden = OperatorHidden.objects.get(operator__release=release, operator__name="rms_norm")
    spec = hardware.as_spec()
    shapes = {}
    for shape_id, entry in hidden.roofline["shapes"].items():
        sol = sol_seconds(ShapeRoofline(entry["semantic_W_flops"], entry["semantic_Q_read_bytes"],
                                        entry["semantic_Q_write_bytes"]), spec)
        # Production took 4x the speed of light on H200 (a = 0.25), 2x on another card.
        shapes[shape_id] = {"production_performance": {
            "h200": {"framework": "vLLM", "performance_us": 4 * sol * 1e6},
            "H100": {"framework": "vLLM", "performance_us": 2 * sol * 1e6}}}
    hidden.metadata = {**hidden.metadata, "shapes": shapes}
    hidden.save()
    both = activate(release, {"rms_norm": 1, "gemm_fp16": 3})
    row = production_baseline(release=release, hardware=hardware, weight_set=both)
    assert row is not None and row["team"] == "Production (vLLM)"
    assert row["aggregate"] == pytest.approx(0.25) and row["memory"] == pytest.approx(0.25)
    assert row["compute"] is None  # rms_norm has no compute-bound shape
    assert "1 operators, 25% of the weight" in row["badges"]
    gemm_only = activate(release, {"gemm_fp16": 1})
    assert production_baseline(release=release, hardware=hardware, weight_set=gemm_only) is None
    data = Client().get(f"/api/boards/{release.pk}/H200/?weights={both.version}").json()
    assert [b["team"] for b in data["baselines"]] == ["Production (vLLM)"]


def test_the_fallback_policy_is_set_per_release_and_rescores(release: Release) -> None:
    submit(release, "Native", {"rms_norm": 0.4})
    submit(release, "Torch", {"rms_norm": 0.9}, verdict="fallback-torch")
    activate(release, {"rms_norm": 1})
    assert ranking(release) == [("Native", 0.4), ("Torch", 0.0)]
    rows = Client().get(f"/api/boards/{release.pk}/H200/").json()["rows"]
    assert rows[1]["badges"] == ["fallback"]
    admin = Client()
    admin.force_login(UserFactory(username="root", is_staff=True))
    url = f"/staff/releases/{release.pk}/weights/"
    assert admin.post(url, {"fallback_scores_zero": "0"}).status_code == 302
    assert ranking(release) == [("Torch", 0.9), ("Native", 0.4)]
    entry = AuditEntry.objects.get(action="release.fallback_policy")
    assert entry.before == {"fallback_scores_zero": True}
    assert entry.after == {"fallback_scores_zero": False} and entry.actor.username == "root"
    admin.post(url, {"fallback_scores_zero": "1"})
    assert ranking(release) == [("Native", 0.4), ("Torch", 0.0)]


def test_a_frozen_board_leaves_out_later_submissions(release: Release) -> None:
    submit(release, "Early", {"rms_norm": 0.4})
    activate(release, {"rms_norm": 1})
    admin, plain = Client(), Client()
    admin.force_login(UserFactory(username="root", is_staff=True))
    plain.force_login(UserFactory(username="plain"))
    url = f"/staff/boards/{release.pk}/H200/freeze/"
    assert plain.post(url, {"action": "freeze"}).status_code == 302  # to the admin sign-in
    assert AuditEntry.objects.filter(action="board.freeze").count() == 0
    assert admin.post(url, {"action": "freeze"}).status_code == 302
    late = submit(release, "Late", {"rms_norm": 0.9})
    rescore_submission(late)
    assert ranking(release) == [("Early", 0.4)]
    page = Client().get(f"/boards/{release.pk}/H200/").content.decode()
    assert "Frozen since" in page
    assert Client().get(f"/api/boards/{release.pk}/H200/").json()["frozen_at"] is not None
    admin.post(url, {"action": "unfreeze"})
    assert ranking(release) == [("Late", 0.9), ("Early", 0.4)]
    actions = list(AuditEntry.objects.filter(action__startswith="board.")
                   .order_by("pk").values_list("action", flat=True))
    assert actions == ["board.freeze", "board.unfreeze"]


def test_the_board_page_shows_fifty_rows_a_page_and_the_exports_all(release: Release) -> None:
    weight_set = weight_set_create(release=release, weights={"rms_norm": 1}, source="manual")
    for index in range(60):
        submit(release, f"team {index:02d}", {"rms_norm": index / 100})
    weight_set_activate(weight_set=weight_set, actor=None)
    first = Client().get(f"/boards/{release.pk}/H200/").content.decode()
    second = Client().get(f"/boards/{release.pk}/H200/?page=2").content.decode()
    row = r'<tr><td data-label="Rank">(\d+)</td><td data-label="Team">team'
    ranks = [int(r) for r in re.findall(row, first)]
    assert ranks == list(range(1, 51))
    assert [int(r) for r in re.findall(row, second)] == list(range(51, 61))
    assert "Rows 1–50 of 60" in first and "Rows 51–60 of 60" in second
    rows = Client().get(f"/api/boards/{release.pk}/H200/").json()["rows"]
    assert len(rows) == 60 and rows[0]["team"] == "team 59"


def test_analysis_plots_output_tokens_against_the_aggregate(release: Release) -> None:
    submit(release, "Thrifty", {"rms_norm": 0.5}, output_tokens=20_000)
    submit(release, "Lavish", {"rms_norm": 0.7}, output_tokens=2_000_000)
    submit(release, "Silent", {"rms_norm": 0.9})  # reported no tokens: not a point
    activate(release, {"rms_norm": 1})
    data = Client().get(f"/api/boards/{release.pk}/H200/analysis/").json()
    assert [(p["team"], p["output_tokens"], p["aggregate"]) for p in data["points"]] == [
        ("Thrifty", 20_000, 0.5), ("Lavish", 2_000_000, 0.7)]
    page = Client().get(f"/boards/{release.pk}/H200/analysis/").content.decode()
    assert 'id="analysis-chart"' in page and "2000000" in page


def test_the_what_changed_page_shows_rank_moves(release: Release) -> None:
    submit(release, "Red", {"rms_norm": 0.8, "gemm_fp16": 0.2})
    submit(release, "Blue", {"rms_norm": 0.2, "gemm_fp16": 0.6})
    norm = activate(release, {"rms_norm": 1})
    gemm = activate(release, {"gemm_fp16": 1})
    page = Client().get(f"/boards/{release.pk}/H200/changes/").content.decode()  # previous -> active
    assert f"weights v{norm.version} → v{gemm.version}" in page
    rows = re.findall(r"<tr><td>(\w+)</td><td class=\"num\">(\d)</td><td class=\"num\">(\d)</td>\s*"
                      r"<td class=\"num\">([^<]+)</td>", page)
    assert rows == [("Blue", "2", "1", "▲ 1"), ("Red", "1", "2", "▼ 1")]


def test_the_submission_page_shows_its_scores_per_operator(release: Release) -> None:
    red = submit(release, "Red", {"rms_norm": 0.8, "gemm_fp16": 0.2})
    activate(release, {"rms_norm": 1, "gemm_fp16": 1})
    client = Client()
    client.force_login(member_of(red.team, "ruby"))
    page = client.get(f"/submissions/{red.pk}/").content.decode()
    scores = dict(re.findall(r"<tr><td>(\w+)</td><td class=\"num\">([\d.]+)</td>", page))
    assert scores["rms_norm"] == "0.800" and scores["gemm_fp16"] == "0.200"
    assert scores["silu_and_mul"] == "0.000"  # no candidate: counts 0
    assert '<td class="num">0.500</td>' in page  # S_agg


def test_a_weight_change_rescores_from_summaries_without_reading_shape_results(
        release: Release) -> None:
    submit(release, "Red", {"rms_norm": 0.8, "gemm_fp16": 0.2})
    summaries_rebuild(release)
    assert ScoreSummary.objects.count() == 1
    weight_set = weight_set_create(release=release, weights={"gemm_fp16": 1}, source="manual")
    with CaptureQueriesContext(connection) as queries:
        assert rescore_weight_set(weight_set) == 1
    assert not any("submissions_shaperesult" in q["sql"] for q in queries.captured_queries)
    assert SubmissionScore.objects.get(weight_set=weight_set).aggregate == pytest.approx(0.2)
    # A submission without a summary yet gets one from its shape results.
    submit(release, "Blue", {"gemm_fp16": 0.6})
    assert rescore_weight_set(weight_set) == 2 and ScoreSummary.objects.count() == 2
