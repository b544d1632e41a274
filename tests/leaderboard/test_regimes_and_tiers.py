"""One definition of a shape's regime (the harness's), and the scored tier only on boards.

Seen before: the portal classified by the dominant precision's ridge point while the
harness compared times, and they disagreed on 3 of 856 starter (shape, hardware) pairs
where a shape runs several precisions; dev-* shapes (sized for CPU checks) counted on GPU
boards because the shape filter defaulted to `*`.
"""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from evaluation.catalog.models import HardwareProfile, OperatorHidden, Release, Shape
from evaluation.harness.release import ShapeRoofline
from evaluation.harness.roofline import roofline_point
from leaderboard.outcomes import scoring_context, shape_regime
from leaderboard.services import rescore_submission, weight_set_activate, weight_set_create
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db


def set_roofline(release: Release, operator: str, shape_id: str, w: dict[str, int],
                 q_bytes: int) -> None:
    hidden = OperatorHidden.objects.get(operator__release=release, operator__name=operator)
    roofline = hidden.roofline
    roofline["shapes"][shape_id] = {"semantic_W_flops": w, "semantic_Q_read_bytes": q_bytes,
                                    "semantic_Q_write_bytes": 0, "SOL_time_ms": {}}
    hidden.roofline = roofline
    hidden.save(update_fields=["roofline"])


def test_a_multi_precision_shape_gets_the_harnesss_regime(release: Release) -> None:
    h200 = HardwareProfile.objects.get(name="H200")
    # fp8 does most FLOPs, but the fp32 part takes most of the compute time (67 TFLOP/s).
    w, q = {"fp8_e4m3": 10**12, "fp32": 9 * 10**11}, 48 * 10**8
    intensity = sum(w.values()) / q
    ridge_of_the_dominant_precision = h200.peak_flops["fp8_e4m3_tc"] / h200.hbm_bytes_per_s
    assert intensity < ridge_of_the_dominant_precision  # the old rule said "memory"
    set_roofline(release, "gemm_fp16", "llama8b-prefill-o-m4096-n4096-k4096", w, q)
    op = release.operators.select_related("hidden").get(name="gemm_fp16")
    point = roofline_point(ShapeRoofline(w, q, 0), h200.as_spec())
    assert point.regime == "compute"
    assert shape_regime(op, "llama8b-prefill-o-m4096-n4096-k4096", h200) == "compute"


def test_a_balanced_shape_counts_on_both_regime_boards(release: Release) -> None:
    h200 = HardwareProfile.objects.get(name="H200")
    spec = h200.as_spec()
    # rms_norm is memory-bound everywhere; make one shape sit on the ridge (bf16 path).
    q = 48 * 10**8
    w = {"bf16": int(q / spec.hbm_bytes_per_s * spec.peak_flops["bf16_tc"] * 1.02)}
    set_roofline(release, "rms_norm", "llama8b-prefill-t4096-h4096", w, q)
    op = release.operators.select_related("hidden").get(name="rms_norm")
    assert shape_regime(op, "llama8b-prefill-t4096-h4096", h200) == "balanced"
    subsets = scoring_context(release).subset_operators(h200)
    assert "rms_norm" in subsets["memory"] and "rms_norm" in subsets["compute"]


def scored_everywhere(release: Release, operator: str, dev: float, scored: float) -> Submission:
    """An old-style job (no shape list of its own) that reported every shape."""
    submission = Submission.objects.create(team=TeamFactory(name="Red"), release=release,
                                           hardware=HardwareProfile.objects.get(name="H200"))
    op = release.operators.get(name=operator)
    candidate = Candidate.objects.create(submission=submission, operator=op, source="",
                                         sha256="0" * 64)
    job = EvaluationJob.objects.create(candidate=candidate, status="scored", attempts=1)
    for shape in Shape.objects.filter(operator=op):
        ShapeResult.objects.create(job=job, attempt=1, shape=shape, status="passed",
                                   verdict="native", raw={},
                                   attainment=dev if shape.shape_id.startswith("dev-") else scored)
    rescore_submission(submission)
    return submission


def test_dev_shapes_never_count_on_a_gpu_board(release: Release) -> None:
    weights = weight_set_create(release=release, weights={"rms_norm": 1}, source="manual")
    weight_set_activate(weight_set=weights, actor=None)
    # 2 dev shapes at 1.0 and 6 scored ones at 0.2: with the dev tier the median would move
    submission = scored_everywhere(release, "rms_norm", dev=1.0, scored=0.2)
    [row] = Client().get(f"/api/boards/{release.pk}/H200/").json()["rows"]
    assert row["aggregate"] == pytest.approx(0.2)
    assert submission.scores.get().by_operator["rms_norm"] == pytest.approx(0.2)


@override_settings(ATREX_SHAPE_FILTER="dev-*")
def test_a_cpu_deployment_scores_its_dev_tier(release: Release) -> None:
    weights = weight_set_create(release=release, weights={"rms_norm": 1}, source="manual")
    weight_set_activate(weight_set=weights, actor=None)
    submission = scored_everywhere(release, "rms_norm", dev=1.0, scored=0.2)
    assert submission.scores.get().by_operator["rms_norm"] == pytest.approx(1.0)
