"""The Atrex paper's table (leaderboard/paper_table.py): one row per team or per agent and
model, its rates over the release's shapes, its speed against the torch.compile and best
open kernel baselines (per operator the ratio of summed times over the shapes both timed,
then the median), per operator the solve rate and the regime split; page, JSON and CSV."""

from __future__ import annotations

import pytest
from django.test import Client

from evaluation.catalog.models import Shape
from leaderboard.paper_table import speedup
from leaderboard.services import rescore_submission, weight_set_activate, weight_set_create
from submissions.models import ShapeResult, Submission
from submissions.services import baseline_team
from tests.builders import SHAPES, scored_kernels, scored_submission
from tests.world import World


def test_speedup_is_the_median_over_operators_of_summed_time_ratios() -> None:
    reference = {("a", "1"): 2.0, ("a", "2"): 2.0, ("b", "1"): 1.0, ("c", "1"): 9.0}
    times = {("a", "1"): 1.0, ("a", "2"): 3.0, ("b", "1"): 4.0, ("b", "2"): 1.0}
    # a: 4 / 4 = 1; b: only shape 1 ran in both, 1 / 4; c: the row never timed it
    assert speedup(reference, times) == pytest.approx((1.0 + 0.25) / 2)
    assert speedup({}, times) is None


def baseline(world: World, kind: str, seconds: float) -> Submission:
    submission = scored_kernels(baseline_team(), world.release,
                                {"rms_norm": ("# reference", 0.2)}, seconds=seconds)
    Submission.objects.filter(pk=submission.pk).update(baseline=kind)
    rescore_submission(submission)
    return submission


def test_the_table_compares_each_row_with_the_baselines(world: World) -> None:
    release = world.release
    weight_set_activate(weight_set=weight_set_create(
        release=release, weights={"rms_norm": 1}, source="manual"), actor=None)
    mine = scored_kernels(world.red, release, {"rms_norm": ("# red", 0.5)}, seconds=10e-6)
    Submission.objects.filter(pk=mine.pk).update(agent="agent-x", model_name="model-1",
                                                 output_tokens=1000)
    blue_submission = scored_submission(release, world.blue, {"rms_norm": 0.1},
                                        verdict="fallback-torch")
    # one shape compiled but failed its correctness trials, one did not compile
    results = list(ShapeResult.objects.filter(job__candidate__submission=blue_submission))
    ShapeResult.objects.filter(pk=results[0].pk).update(status="failed", stage_reached="compile",
                                                        failed_stage="correctness")
    ShapeResult.objects.filter(pk=results[1].pk).update(status="failed", stage_reached="",
                                                        failed_stage="compile")
    rescore_submission(blue_submission)
    baseline(world, "torch_compile", 20e-6)
    baseline(world, "best_open", 5e-6)
    reply = Client().get(f"/api/boards/{release.pk}/H200/table/")
    assert reply.status_code == 200
    table = reply.json()
    total = Shape.objects.filter(operator__release=release).count()
    red = next(r for r in table["rows"] if r["team"] == world.red.name)
    assert red["row"] == "agent-x / model-1" and red["output_tokens"] == 1000
    assert red["compile_rate"] == pytest.approx(SHAPES / total)
    assert red["native_rate"] == red["correct_rate"] == pytest.approx(SHAPES / total)
    assert red["vs_torch_compile"] == pytest.approx(2.0)
    assert red["vs_best_open"] == pytest.approx(0.5)
    assert red["vs_production"] is None and table["references"]["production"] is False
    blue = next(r for r in table["rows"] if r["team"] == world.blue.name)
    assert blue["row"] == world.blue.name and blue["native_rate"] == 0.0
    rms_shapes = Shape.objects.filter(operator__release=release, operator__name="rms_norm").count()
    assert blue["correct_rate"] == pytest.approx((rms_shapes - 2) / total)
    assert blue["compile_rate"] == pytest.approx((rms_shapes - 1) / total)
    rms = next(o for o in table["operators"] if o["operator"] == "rms_norm")
    assert rms["solve_rate"] == 0.0  # Red ran 3 of its shapes, Blue fell back
    assert rms["memory_shapes"] + rms["compute_shapes"] >= rms["shapes"] > 0
    csv_text = Client().get(f"/api/boards/{release.pk}/H200/table/?format=csv").content.decode()
    assert csv_text.startswith("row,team,agent,model,submission,compile_rate")
    assert "agent-x / model-1" in csv_text and "\noperator,solve_rate" in csv_text
    page = Client().get(f"/boards/{release.pk}/H200/table/").content.decode()
    assert 'id="paper-table"' in page and "2.00×" in page and "0.50×" in page
