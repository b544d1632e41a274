"""What a worker reports, as tests write it: shapes and events for the results consumer, and
submissions evaluated through it (submissions.jobs.record_event), as a GPU or a CPU run."""

from __future__ import annotations

import io
import zipfile
from typing import Any

from evaluation.catalog.models import HardwareProfile
from leaderboard.services import rescore_submission, weight_set_from_release
from portal.accounts.models import Team
from submissions.jobs import record_event
from submissions.models import EvaluationJob, Submission
from submissions.services import submission_create
from tests.paths import SAMPLE_CANDIDATES
from tests.world import import_fixture_release

DEV_SHAPES = ("dev-t4-h256", "dev-t3-h200")  # rms_norm's dev tier, in shape order
WRONG = "correctness: max abs error 0.53 > atol 0.01 + rtol 0.01 * |expected|"
RMS_SHAPE = "llama8b-prefill-t4096-h4096"  # memory-bound on the H200: SOL 13.98 µs
GEMM_SHAPE = "llama8b-prefill-o-m4096-n4096-k4096"  # compute-bound on the H200: SOL 138.97 µs
# As the trusted parent records it (harness/environment.py), clocks read through NVML.
H200_ENVIRONMENT = {"gpu": "NVIDIA H200", "driver": "580.159.04", "cuda": "13.0",
                    "torch": "2.11.0+cu130", "python": "3.12.3", "dsl": "triton",
                    "dsl_version": "3.6.0", "clocks_before": {"sm_mhz": 1980, "memory_mhz": 3201},
                    "clocks_after": {"sm_mhz": 1965, "memory_mhz": 3201}}


def native(name: str) -> str:
    """The sample honest Triton candidate of operator `name`."""
    return (SAMPLE_CANDIDATES / name / "triton_native.py").read_text()


def checked_shape(shape_id: str, passed: bool = True, adoption: dict[str, Any] | None = None,
                  median_s: float | None = None) -> dict[str, Any]:
    """A shape as the harness reports it (no time: a CPU run)."""
    return {"shape_id": shape_id, "status": "passed" if passed else "failed",
            "stage_reached": "adoption" if passed else "compile",
            "failed_stage": None if passed else "correctness", "error": None if passed else WRONG,
            "max_abs_error": 0.0 if passed else 0.53, "max_rel_error": 0.0,
            "adoption": adoption or {"verdict": "native", "dsl_ratio": 1.0},
            "timing": {"measured": median_s is not None, "median_s": median_s, "n": 20,
                       "method": "graph"}}


def finish(job: EvaluationJob, *shapes: dict[str, Any], mode: str = "gpu") -> None:
    """`job`'s attempt 1 started and ended with `shapes`."""
    ids = {"job_id": job.pk, "attempt": 1, "worker": "gpu-1", "run": "r1"}
    record_event("started", {**ids, "mode": mode})
    record_event("result", {**ids, "result": {"mode": mode, "evaluator_version": "0.1.0",
                                              "shapes": list(shapes)}})


def timed_shape(shape_id: str, median_s: float | None = 20e-6,
                status: str = "passed") -> dict[str, Any]:
    """A shape that reached the performance stage, timed at `median_s`."""
    return {"shape_id": shape_id, "status": status, "stage_reached": "performance",
            "failed_stage": None, "error": None, "max_abs_error": 0.01, "max_rel_error": 0.01,
            "adoption": {"verdict": "native", "dsl_ratio": 1.0},
            "timing": {"measured": median_s is not None, "median_s": median_s, "n": 20,
                       "method": "graph"}}


def event(job: EvaluationJob, **extra: Any) -> dict[str, Any]:
    """An event of `job`'s current attempt from worker gpu-1."""
    return {"job_id": job.pk, "attempt": job.attempts, "worker": "gpu-1", **extra}


def gpu_shape(shape_id: str, *, median_s: float | None, kernels: list[tuple[str, str, int, float]],
              passed: bool = True, verdict: str = "native", legacy: bool = False,
              kernels_per_forward: float = 2.0,
              environment: dict[str, Any] | None = H200_ENVIRONMENT) -> dict[str, Any]:
    """A shape as a GPU worker reports it: the adoption stage's kernels (name, category,
    launches, device µs) and the timing stage's median. `legacy`: as the harness reported
    before it listed the candidate's own kernels one by one."""
    by_category: dict[str, float] = {}
    for _, category, _, us in kernels:
        by_category[category] = by_category.get(category, 0.0) + us * 1e-6
    listed = [{"name": n, "category": c, "count": k, "device_time_us": us}
              for n, c, k, us in kernels]
    adoption: dict[str, Any] = {
        "verdict": verdict, "method": "device-time", "time_by_category": by_category,
        "dsl_ratio": by_category.get("dsl", 0.0) / (sum(by_category.values()) or 1.0),
        "foreign_kernels": [k for k in listed if k["category"] != "dsl"],
        "aten_compute_ops": {}, "dsl_kernels": sorted(n for n, c, _, _ in kernels if c == "dsl")}
    if not legacy:
        adoption["kernels"] = listed
    return {"shape_id": shape_id, "status": "passed" if passed else "failed",
            "stage_reached": "performance" if passed else "correctness",
            "failed_stage": None if passed else "correctness",
            "error": None if passed else "correctness: max abs error 0.5 > atol",
            "max_abs_error": 0.0, "max_rel_error": 0.0, "adoption": adoption,
            "timing": {"measured": median_s is not None, "median_s": median_s,
                       "p10_s": median_s and median_s * 0.95, "p90_s": median_s and median_s * 1.1,
                       "n": 40, "method": "graph", "scored_as": "span",
                       "span_measured_by": "profiler",
                       # graph replay: the wall holds the replay's launch from an idle device
                       "wall_median_s": median_s and median_s + 15e-6,
                       "busy_median_s": median_s and median_s * 0.97,
                       "kernels_per_forward": kernels_per_forward},
            "environment": environment}


def gpu_submission(team: Team, sources: dict[str, str], results: dict[str, list[dict[str, Any]]],
                   *, mode: str = "ranked", job_mode: str = "gpu") -> Submission:
    """An upload, evaluated as a GPU worker would report it: per operator its shapes."""
    release = import_fixture_release()
    weight_set_from_release(release)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, source in sources.items():
            archive.writestr(f"{name}.py", source)
    submission = submission_create(team=team, user=None, release=release,
                                   hardware=HardwareProfile.objects.get(name="H200"),
                                   filename="kernels.zip", data=buffer.getvalue(), mode=mode)
    EvaluationJob.objects.filter(candidate__submission=submission).update(attempts=1)
    for job in EvaluationJob.objects.filter(candidate__submission=submission).select_related(
            "candidate__operator"):
        ids = {"job_id": job.pk, "attempt": 1, "worker": "gpu-1", "run": f"r{job.pk}"}
        record_event("started", {**ids, "mode": job_mode})
        record_event("result", {**ids, "result": {
            "mode": job_mode, "evaluator_version": "0.1.0",
            "shapes": results.get(job.candidate.operator.name, [])}})
    rescore_submission(submission)
    submission.refresh_from_db()
    return submission
