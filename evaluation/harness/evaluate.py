"""The trusted side of an evaluation: per shape, drive the stages and judge the results.

The parent draws secret seeds, asks the sandboxed child to run the candidate on inputs
drawn from them, computes the reference itself on the same inputs and compares. It needs
only public files (a GPU host has nothing else); `apply_roofline` adds SOL and attainment
where the hidden roofline lives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import platform
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import torch

from .dsl import unavailable_reason
from .isolation.child_process import ChildProcess, WarmChildren
from .isolation.device_memory import configure_cuda_allocator, release_cached_memory
from .isolation.sandbox import CandidateError, ChildDied, ChildTimeout, HarnessError, describe_exit
from .release import HardwareSpec, ShapeRoofline
from .request import FULL_CHECKS, EvaluationRequest, EvaluationSettings, checks_for
from .results import PASSED, EvaluationResult, ShapeReport
from .roofline import attainment, roofline_point
from .stages.adoption import AdoptionStage
from .stages.correctness import CorrectnessStage
from .stages.performance import PerformanceStage
from .stages.shape import ReferenceOutOfMemory, _TrustedSide

# The harness's front door: what a caller (the worker, the command line, benchmarks) needs.
__all__ = ["EvaluationRequest", "EvaluationSettings", "GPU_MODE", "INTERPRETER_MODE",
           "ProgressCallback", "apply_roofline", "evaluate", "evaluation_mode"]

ProgressCallback = Callable[[ShapeReport, int, int], None]
GPU_MODE, INTERPRETER_MODE = "gpu", "cpu-interpreter"  # EvaluationResult.mode


def evaluation_mode(device_type: str) -> str:
    """"gpu", or "cpu-interpreter": Triton's interpreter, which measures no time."""
    return GPU_MODE if device_type == "cuda" else INTERPRETER_MODE


def evaluate(job: EvaluationRequest, settings: EvaluationSettings = EvaluationSettings(),
             progress: ProgressCallback | None = None,
             warm: WarmChildren | None = None) -> EvaluationResult:
    """Evaluate one candidate on the job's shapes. `warm` supplies pre-started children."""
    shapes = [s for s in job.operator.shapes if job.shape_ids is None or s.id in job.shape_ids]
    unknown = set(job.shape_ids or ()) - {s.id for s in shapes}
    if unknown:
        raise ValueError(f"unknown shapes for {job.operator.name}: {sorted(unknown)}")
    if {s.id for s in job.hidden_shapes} & {s.id for s in job.operator.shapes}:
        raise ValueError(f"{job.operator.name}: a hidden shape has a public shape's id")
    shapes += job.hidden_shapes  # last: see EvaluationRequest.hidden_shapes
    started = time.perf_counter()
    device = torch.device(settings.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cannot = unavailable_reason(job.dsl, device.type)
    if cannot is not None:
        raise HarnessError(cannot)
    if device.type == "cuda":
        configure_cuda_allocator()
    if warm is not None:
        if (warm.device, warm.dsl, warm.masked_paths) != (device.type, job.dsl,
                                                          tuple(job.masked_paths)):
            raise ValueError("the warm children were made for another device, DSL or mask")
        child = warm.take()
    else:
        child = ChildProcess(device=device.type, dsl=job.dsl, masked_paths=job.masked_paths,
                             settings=settings.sandbox)
        child.start()  # its imports and CUDA start-up overlap ours below
    child.bind(job.operator, job.candidate_source)
    checks = checks_for(job)
    try:
        result = EvaluationResult(
            operator=job.operator.name, dsl=job.dsl,
            device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            mode=evaluation_mode(device.type),
            candidate_sha256=hashlib.sha256(job.candidate_source.encode()).hexdigest(),
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            versions=_versions(), isolation=dataclasses.asdict(child.isolation),
            checks=checks,
        )
        trusted = _TrustedSide(job, device)
        for index, shape in enumerate(shapes):
            restarts_before = child.restarts
            shape_result = _ShapeRun(job, settings, trusted, child, shape.id, device,
                                     checks).run()
            shape_result.child_restarts = child.restarts - restarts_before
            result.shapes.append(shape_result)
            if progress is not None:
                progress(shape_result, index + 1, len(shapes))
    finally:
        child.close()
    result.child_start_seconds = child.start_seconds
    result.finished_at = datetime.now(UTC).isoformat(timespec="seconds")
    result.seconds = time.perf_counter() - started
    return result


def apply_roofline(result: EvaluationResult, rooflines: Mapping[str, ShapeRoofline],
                   hardware: HardwareSpec) -> EvaluationResult:
    """SOL per shape, and attainment where a correct shape was timed (trusted side only)."""
    result.hardware = hardware.name
    for shape in result.shapes:
        roofline = rooflines.get(shape.shape_id)
        if roofline is None:
            continue
        point = roofline_point(roofline, hardware)
        entry: dict[str, Any] = {
            "hardware": hardware.name, "sol_s": point.sol_s, "regime": point.regime,
            "arithmetic_intensity": point.arithmetic_intensity,
            "attainment": None, "attainment_with_floor": None, "suspicious": False,
        }
        timing = shape.timing or {}
        if shape.status == PASSED and timing.get("measured") and timing.get("median_s"):
            score = attainment(point.sol_s, timing["median_s"], hardware.launch_floor_s)
            entry.update(attainment=score.attainment,
                         attainment_with_floor=score.attainment_with_floor,
                         suspicious=score.suspicious)
        elif shape.status == PASSED:
            entry["attainment_note"] = timing.get("reason") or "not timed"
        else:
            entry["attainment"] = 0.0
        shape.roofline = entry
    return result


class _ShapeRun(CorrectnessStage, AdoptionStage, PerformanceStage):
    """One shape through its stages in order (stages/): correctness, adoption (full checks
    only), performance; a failure of the candidate's fails the shape, never the job."""

    def run(self) -> ShapeReport:
        started = time.perf_counter()
        try:
            if self._timed("correctness", self._correctness):
                if self.checks == FULL_CHECKS:
                    self._timed("adoption", self._adoption)
                self._timed("performance", self._performance)
        except CandidateError as exc:
            self.result.fail(exc.stage if exc.stage != "harness" else self.stage, exc.message,
                             exc.traceback)
        except ChildTimeout as exc:
            self.result.fail(self.stage, f"timed out after {exc.seconds:.0f} s in the "
                                         f"{self.stage} stage; the process group was killed",
                             exc.stderr_tail)
        except ChildDied as exc:
            self.result.fail(self.stage, f"{describe_exit(exc.returncode)} during the "
                                         f"{self.stage} stage", exc.stderr_tail)
        except ReferenceOutOfMemory as exc:
            self.result.fail("reference", str(exc))
        finally:
            self._reference_model = None
            release_cached_memory(self.device)
        breaches = self.child.limit_breaches()
        if breaches and self.result.status != PASSED:
            # Why the process died, ran out of forks or stalled, where a limit says it.
            self.result.error = f"{self.result.error}; {'; '.join(breaches)}"
        self.result.seconds = time.perf_counter() - started
        self.result.steps = self.steps.as_report()
        return self.result


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    return versions
