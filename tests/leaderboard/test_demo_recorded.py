"""The embedded default's boards hold the sample candidates' recorded H200 results in each
DSL (leaderboard/demo.py), stored and scored as the portal stores any job's report."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from evaluation.catalog.models import Release, Shape
from leaderboard.demo import RECORDED
from submissions.models import ShapeResult, Submission
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def fixture_release() -> Release:
    call_command("setup_demo", stdout=io.StringIO())
    return Release.objects.get(name="atrex-fixture")


def board(release: Release, query: str = "") -> dict[str, Any]:
    reply = Client().get(f"/api/boards/{release.pk}/H200/{query}")
    assert reply.status_code == 200, reply.content
    data: dict[str, Any] = reply.json()
    return data


def test_a_first_visit_sees_teams_in_three_dsls_ranked_from_recorded_results(
        fixture_release: Release) -> None:
    rows = {r["team"]: r for r in board(fixture_release)["rows"]}
    assert {name: r["dsl"] for name, r in rows.items() if name != "Shortcut samples"} == {
        "Triton samples": "triton", "Gluon samples": "gluon", "CuTe DSL samples": "cute"}
    honest = [r for name, r in rows.items() if name != "Shortcut samples"]
    assert all(r["aggregate"] > 0 for r in honest)
    # mixed and fallback shapes score 0 on a ranked board: the shortcuts gain nothing
    assert rows["Shortcut samples"]["aggregate"] == 0
    assert "fallback" in rows["Shortcut samples"]["badges"]
    assert {r["team"] for r in board(fixture_release, "?dsl=gluon")["rows"]} == {
        "Gluon samples", "Shortcut samples"}
    # recorded as medians alone (no timing samples): no interval, and every row says so;
    # the shortcuts' 0 (fallbacks) is certain
    assert all(r["interval"] is None and r["badges"] == ["no interval"] for r in honest)
    assert rows["Shortcut samples"]["interval"] == [0.0, 0.0]
    page = Client().get(f"/boards/{fixture_release.pk}/H200/").content.decode()
    assert page.count('<small class="interval">no interval</small>') == len(honest)


def test_the_dishonest_samples_are_correct_but_not_adopted(fixture_release: Release) -> None:
    rates = {r["dsl"]: r for r in board(fixture_release)["dsl_rates"]}
    assert set(rates) == {"triton", "gluon", "cute"}
    # the Shortcut team's CuTe DSL files (torch.matmul; a Triton file) were correct, not native:
    # of 8 scored-tier shapes in CuTe DSL files (gemm_fp16's two files one each), 5 native
    assert rates["cute"]["correctness_rate"] == 1.0
    assert rates["cute"]["adoption_rate"] == pytest.approx(5 / 8)
    assert rates["triton"]["adoption_rate"] == 1.0


def test_the_portal_computes_the_same_attainment_the_gpu_run_reported(
        fixture_release: Release) -> None:
    recorded = {(row["sample"], s["shape"]): s["attainment"] for path in RECORDED
                for row in json.loads(path.read_text()) if row.get("sample")
                for s in row["outcome"].get("shapes") or []}
    stored = (ShapeResult.objects.filter(job__candidate__submission__release=fixture_release,
                                         job__candidate__submission__baseline="")
              .select_related("shape", "job__candidate__operator"))
    # ten cases, two shapes each, but for gemm_fp16's dev-tier shape in its three
    assert stored.count() == 17
    for result in stored:
        assert result.raw["recorded"]["source"].startswith("benchmarks/results/h200-2026-12-02/")
        assert result.raw["recorded"]["gpu"] == "NVIDIA H200"
        sample = next(name for name, shape in recorded if shape == result.shape.shape_id
                      and name.startswith(result.job.candidate.operator.name))
        assert sample
    by_sample = {(r.job.candidate.dsl, r.job.candidate.operator.name, r.shape.shape_id):
                 r.attainment for r in stored}
    assert by_sample[("cute", "rms_norm", "llama8b-prefill-t4096-h4096")] == pytest.approx(
        recorded[("rms_norm/cute_native.py", "llama8b-prefill-t4096-h4096")], rel=1e-9)
    assert by_sample[("gluon", "gemm_fp16", "llama8b-decode-qkv-m1-n6144-k4096")] == \
        pytest.approx(recorded[("gemm_fp16/gluon_native.py",
                                "llama8b-decode-qkv-m1-n6144-k4096")], rel=1e-9)


def test_setting_up_again_adds_nothing(fixture_release: Release) -> None:
    before = ShapeResult.objects.count()
    call_command("setup_demo", stdout=io.StringIO())
    assert ShapeResult.objects.count() == before


def test_pages_using_recorded_results_say_where_they_come_from(fixture_release: Release) -> None:
    board = Client().get(f"/boards/{fixture_release.pk}/H200/").content.decode()
    assert 'id="provenance"' in board
    assert ("NVIDIA H200, 2026-12-02, evaluator of 2026-12-02 (docs/measurement.md): "
            "benchmarks/results/h200-2026-12-02/dsl-samples.json") in board
    assert "NVIDIA H200" in board  # the environment line under the table
    submission = ShapeResult.objects.filter(
        job__candidate__submission__release=fixture_release).first().job.candidate.submission  # type: ignore[union-attr]
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "Recorded on one NVIDIA H200, 2026-12-02" in page


def test_a_board_without_recorded_results_says_nothing_of_them() -> None:
    call_command("setup_demo", "--no-recorded", stdout=io.StringIO())
    release = Release.objects.get(name="atrex-fixture")
    assert 'id="provenance"' not in Client().get(f"/boards/{release.pk}/H200/").content.decode()


def test_the_starter_boards_hold_its_recorded_baselines_with_their_own_timing_rule() -> None:
    call_command("setup_demo", stdout=io.StringIO())
    starter = Release.objects.get(name="atrex-starter")
    baselines = {r["team"]: r for r in board(starter)["baselines"]}
    # the S_agg docs/baselines.md reports for the same run, under the release's weights
    assert baselines["PyTorch reference"]["aggregate"] == pytest.approx(0.083, abs=5e-4)
    assert baselines["torch.compile reference"]["aggregate"] == pytest.approx(0.210, abs=5e-4)
    for name in ("memory/", "compute/", "prefill/", "decode/"):
        assert all(r["aggregate"] is not None for r in board(starter, name)["baselines"])
    # their run kept medians alone: no interval, said
    assert all(r["interval"] is None and r["badges"] == ["baseline", "no interval"]
               for r in baselines.values())
    page = Client().get(f"/boards/{starter.pk}/H200/").content.decode()
    assert "eager forwards then scored by profiled busy time, since replaced" in page
    operator = Client().get(f"/api/boards/{starter.pk}/H200/operators/rms_norm/").json()
    assert operator["teams"] == 0 and operator["solve_rate"] is None
    assert {r["team"] for r in operator["baselines"]} == {"PyTorch reference",
                                                        "torch.compile reference"}
    assert all(0 < r["score"] < 1 for r in operator["baselines"])


def test_the_fixture_gets_a_second_weight_version_from_a_real_trace(
        fixture_release: Release) -> None:
    versions = list(fixture_release.weight_sets.order_by("version"))
    assert [(w.version, w.source, w.active) for w in versions] == [
        (1, "release", False), (2, "traces", True)]
    weights = versions[1].weights
    assert weights["topk_softmax_gating"] == 0  # a dense Llama runs no MoE gating
    assert weights["gemm_fp16"] > weights["rms_norm"] > 0  # its linears, under the fixture's name
    changes = Client().get(f"/api/boards/{fixture_release.pk}/H200/changes/").json()
    assert (changes["from"], changes["to"]) == (1, 2)
    moved = [r for r in changes["rows"] if r["aggregate_before"] != r["aggregate_after"]]
    assert {r["team"] for r in moved} >= {"Gluon samples", "Triton samples"}
    page = Client().get(f"/boards/{fixture_release.pk}/H200/changes/").content.decode()
    assert 'id="provenance"' in page


PUBLIC = Path(__file__).resolve().parents[3] / "shared" / "atrex-bench"  # beside the checkout


@pytest.mark.skipif(not PUBLIC.is_dir(), reason="the public Atrex-Bench release is not beside "
                                                "this checkout")
def test_the_public_release_comes_with_its_recorded_baseline_after_the_timing_change() -> None:
    call_command("setup_demo", "--public-release", str(PUBLIC), stdout=io.StringIO())
    public = Release.objects.get(name="atrex-bench")
    rows = board(public)["baselines"]
    baseline = [r for r in rows if r["team"] == "PyTorch reference"]
    # docs/baselines.md: S_agg 0.013916 over its 30 operators, release weights
    assert [(r["team"], round(r["aggregate"], 6)) for r in baseline] == [
        ("PyTorch reference", 0.013916)]
    # stored before timing samples were kept (p10/p90 of 163 shapes re-derived): no interval
    assert [(r["interval"], r["badges"]) for r in baseline] == [(None, ["baseline",
                                                                         "no interval"])]
    # beside it, the recorded expert ladder (benchmarks/results/h200-library-ladder/,
    # docs/baselines.md): each library's row and the best open kernel, above the reference
    ladder = {r["team"]: round(r["aggregate"], 4) for r in rows if r not in baseline}
    assert ladder["best open kernel"] == 0.0385
    assert ladder["best open kernel"] == max(ladder.values()) > baseline[0]["aggregate"]
    assert len(ladder) == 5  # flag-gems, liger-kernel, fla-core, best open kernel, torch.compile
    # torch.compile on the 12 operators the H200 had time for (the others count 0)
    assert ladder["torch.compile reference"] == 0.0326
    reference = {"job__candidate__submission__release": public,
                 "job__candidate__submission__baseline": Submission.Baseline.PYTORCH}
    assert ShapeResult.objects.filter(**reference).count() == 440
    count = ShapeResult.objects.filter(job__candidate__submission__release=public).count()
    call_command("setup_demo", "--public-release", str(PUBLIC), stdout=io.StringIO())
    assert ShapeResult.objects.filter(**reference).count() == 440
    # loading again stores nothing twice
    assert ShapeResult.objects.filter(job__candidate__submission__release=public).count() == count


def test_a_folder_that_is_no_release_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="not an Atrex-Bench release folder"):
        call_command("setup_demo", "--public-release", str(tmp_path), stdout=io.StringIO())
    assert not Release.objects.exists()


def test_the_demo_draws_the_starters_hidden_tier_from_a_secret_it_keeps_in_var(
        settings: Any, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path
    call_command("setup_demo", "--no-recorded", stdout=io.StringIO())
    secret = tmp_path / "hidden-tier.secret"
    assert secret.stat().st_mode & 0o777 == 0o600
    starter = Release.objects.get(name="atrex-starter")
    # one id may name a shape of two operators (both made from one public id): count pairs
    hidden = set(Shape.every_tier.filter(operator__release=starter, hidden=True)
                 .values_list("operator__name", "shape_id"))
    assert len(hidden) == 31
    operator = Client().get(f"/api/boards/{starter.pk}/H200/operators/rms_norm/").json()
    assert operator["hidden_shapes"] == 3
    call_command("setup_demo", "--no-recorded", stdout=io.StringIO())  # the same secret again
    assert list(Release.objects.filter(name="atrex-starter").values_list("version", flat=True)) \
        == [starter.version]


def test_no_recorded_result_of_the_dev_tier_reaches_a_board(fixture_release: Release) -> None:
    """The runs took a dev-tier gemm_fp16 shape too; the docs say no board scores it."""
    assert not ShapeResult.objects.filter(job__candidate__submission__release=fixture_release,
                                          shape__shape_id__startswith="dev-").exists()
    from submissions.models import EvaluationJob

    for job in EvaluationJob.objects.filter(candidate__submission__release=fixture_release):
        assert not [s for s in job.shape_ids if s.startswith("dev-")], job.shape_ids
