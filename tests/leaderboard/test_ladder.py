"""The expert ladder's recorded rows (leaderboard/ladder.py, demo.load_recorded_ladder): each
library's adapters as a baseline row named by package and version, the best of them per
operator as the "best open kernel" row, the torch.compile baseline; unranked; left out, with
nothing in their place, while the results file is absent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.test import Client

from evaluation.catalog.models import Release, Shape
from leaderboard.demo import load_recorded_ladder
from leaderboard.services import weight_set_activate, weight_set_create
from submissions.models import Submission
from tests.world import World


def library_shape(shape_id: str, median_s: float, package: str) -> dict[str, Any]:
    """A shape as the worker reports an adapter's: correct, timed, its library named."""
    name, version = package.split(" ")
    return {"shape_id": shape_id, "status": "passed", "stage_reached": "performance",
            "failed_stage": None, "error": None, "max_abs_error": 0.0, "max_rel_error": 0.0,
            "adoption": {"verdict": "library", "dsl_ratio": 0.0,
                         "libraries": [{"package": name, "version": version,
                                        "kernels": ["rms_norm_kernel"]}]},
            "timing": {"measured": True, "median_s": median_s, "n": 20, "method": "graph"},
            "environment": {"libraries": {name: version}}}


def ladder_file(tmp_path: Path, release: Release) -> Path:
    """FlagGems faster on rms_norm, Liger on silu_and_mul; torch.compile on rms_norm."""
    ids = {op: list(Shape.objects.filter(operator__release=release, operator__name=op)
                    .values_list("shape_id", flat=True)[:2]) for op in ("rms_norm", "silu_and_mul")}

    def operator(op: str, seconds: float, package: str) -> dict[str, Any]:
        return {"source_file": f"evaluation/library_candidates/x/{op}.py",
                "shapes": [library_shape(s, seconds, package) for s in ids[op]]}

    results = {
        "meta": {"date": "2026-12-05", "hardware": "H200"},
        "libraries": {
            "flag-gems": {"version": "5.0.2", "operators": {
                "rms_norm": operator("rms_norm", 10e-6, "flag-gems 5.0.2"),
                "silu_and_mul": operator("silu_and_mul", 40e-6, "flag-gems 5.0.2")}},
            "liger-kernel": {"version": "0.8.5", "operators": {
                "rms_norm": operator("rms_norm", 20e-6, "liger-kernel 0.8.5"),
                "silu_and_mul": operator("silu_and_mul", 10e-6, "liger-kernel 0.8.5")}}},
        "torch_compile": {"rms_norm": {"shapes": [
            {**library_shape(s, 30e-6, "x 0"), "adoption": {"verdict": "fallback-compiled",
                                                             "dsl_ratio": 0.0}}
            for s in ids["rms_norm"]]}},
    }
    path = tmp_path / "ladder.json"
    path.write_text(json.dumps(results))
    return path


def baselines(release: Release) -> dict[str, dict[str, Any]]:
    reply = Client().get(f"/api/boards/{release.pk}/H200/").json()
    return {row["team"]: row for row in reply["baselines"]}


def test_the_ladder_is_stored_as_unranked_rows_with_the_best_open_kernel(
        world: World, tmp_path: Path) -> None:
    release = world.release
    weight_set_activate(weight_set=weight_set_create(
        release=release, weights={"rms_norm": 1, "silu_and_mul": 1}, source="manual"), actor=None)
    stored = load_recorded_ladder(release, ladder_file(tmp_path, release))
    assert stored == ["flag-gems 5.0.2 (2 operators)", "liger-kernel 0.8.5 (2 operators)",
                      "torch.compile reference (1 operators)", "best open kernel (2 operators)"]
    rows = baselines(release)
    flag, liger = rows["flag-gems 5.0.2 (open library)"], rows["liger-kernel 0.8.5 (open library)"]
    best = rows["best open kernel"]
    assert flag["rank"] is None and flag["dsl"] == "library" and "baseline" in flag["badges"]
    # the best open kernel takes FlagGems' rms_norm and Liger's silu_and_mul: above both
    assert best["aggregate"] > max(flag["aggregate"], liger["aggregate"])
    note = Submission.objects.get(baseline="best_open").notes
    assert "rms_norm: flag-gems 5.0.2" in note and "silu_and_mul: liger-kernel 0.8.5" in note
    assert "torch.compile reference" in rows
    assert Client().get(f"/api/boards/{release.pk}/H200/").json()["rows"] == []  # none ranked
    # idempotent
    assert load_recorded_ladder(release, ladder_file(tmp_path, release)) == []


def test_without_the_results_file_no_ladder_row_is_shown(world: World, tmp_path: Path) -> None:
    assert load_recorded_ladder(world.release, tmp_path / "absent.json") is None
    assert not Submission.objects.filter(baseline__in=["library", "best_open"]).exists()
