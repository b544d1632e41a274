"""A copy of the fixture release with a hidden shape tier, and a GPU worker's reports of a
job on it: shared by the tests of the hidden tier (a helper module, not a test module).

rms_norm gets two hidden shapes: a dev-sized one (run by Triton's interpreter under the
tests' "dev-*" shape filter) and a scored one. Their ids and their one distinctive size are
words no page a team can reach may hold.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from evaluation.catalog.models import Release
from evaluation.release_tools.make_fixture_roofline import write_release_rooflines
from submissions.jobs import record_event
from submissions.models import EvaluationJob
from tests.paths import FIXTURE_RELEASE

HIDDEN_DEV = "dev-unseen-t5-h328"
HIDDEN_SCORED = "llama8b-unseen-prefill-t640-h4096"
HIDDEN_SHAPES = {
    HIDDEN_DEV: {"init_kwargs": {"eps": 1e-06}, "input_kwargs": {"num_tokens": 5,
                                                                 "hidden_size": 328}},
    HIDDEN_SCORED: {"init_kwargs": {"eps": 1e-06}, "input_kwargs": {"num_tokens": 640,
                                                                    "hidden_size": 4096}},
}
# What a hidden shape's result or failure would show of it: its ids and its dev shape's size
# as torch prints it.
HIDDEN_WORDS = (HIDDEN_DEV, HIDDEN_SCORED, "unseen", "[5, 328]")


def hidden_tier_release(folder: Path) -> Path:
    """The fixture release with rms_norm's hidden tier (its roofline regenerated to cover
    it), under `folder`."""
    target = folder / "atrex-fixture"
    shutil.copytree(FIXTURE_RELEASE, target)
    (target / "data" / "rms_norm" / "hidden_shapes.json").write_text(json.dumps(HIDDEN_SHAPES))
    write_release_rooflines(target)
    return target


def without_hold(release: Release) -> Release:
    """The release with its hidden tier released the moment a job's worker ends it (a budget
    and a quantum of 0): for tests of what the hidden tier shows once released. The hold
    itself is tests/submissions/test_hidden_tier_clock.py's."""
    Release.objects.filter(pk=release.pk).update(hidden_shape_budget_s=0,
                                                 hidden_budget_per_public=0,
                                                 hidden_release_quantum_s=0)
    release.refresh_from_db()
    return release


def shape_report(shape_id: str, *, median_s: float | None = None, error: str = "",
                 verdict: str = "native") -> dict[str, Any]:
    """One shape as a GPU worker reports it: passed and timed at `median_s`, or failed with
    `error` (the candidate's own words, which may name what it was called with)."""
    if error:
        return {"shape_id": shape_id, "status": "failed", "failed_stage": "correctness",
                "stage_reached": "correctness", "error": error}
    return {"shape_id": shape_id, "status": "passed", "stage_reached": "timing",
            "adoption": {"verdict": verdict, "dsl_ratio": 1.0},
            "timing": {"measured": True, "median_s": median_s, "median_se_s": 0.0,
                       "p10_s": median_s, "p90_s": median_s, "n": 20, "method": "graph",
                       "wall_median_s": median_s}}


def report_job(job: EvaluationJob, shapes: list[dict[str, Any]], *,
               failed: str | None = None) -> None:
    """A GPU run of the job's current attempt as the results consumer receives it: started,
    one progress report per shape, then the result (or `failed`, with that reason)."""
    ids = {"job_id": job.pk, "attempt": job.attempts, "worker": "gpu0@test", "run": "run-1"}
    record_event("started", {**ids, "shapes_total": job.shapes_total, "mode": "gpu"})
    for done, shape in enumerate(shapes, start=1):
        record_event("progress", {**ids, "done": done, "total": job.shapes_total,
                                  "shape": shape})
    if failed is not None:
        record_event("failed", {**ids, "reason": failed, "infrastructure": False})
    else:
        record_event("result", {**ids, "result": {"mode": "gpu", "shapes": shapes,
                                                  "evaluator_version": "test"}})
