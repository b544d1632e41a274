"""Running real evaluations (sandboxed child, CPU interpreter) from tests."""

from __future__ import annotations

from collections.abc import Sequence

from evaluation.harness.evaluate import EvaluationRequest, EvaluationSettings, evaluate
from evaluation.harness.isolation.child_process import WarmChildren
from evaluation.harness.release import load_release
from evaluation.harness.results import EvaluationResult
from tests.paths import FIXTURE_RELEASE, SAMPLE_CANDIDATES

# Short timeouts: the dev shapes run in well under a second in the interpreter.
TEST_SETTINGS = EvaluationSettings(compile_timeout_s=60.0, call_timeout_s=60.0, device="cpu")


def dev_shapes(operator: str) -> list[str]:
    release = load_release(FIXTURE_RELEASE)
    return [s.id for s in release.operator(operator).public.shapes if s.id.startswith("dev-")]


def sample_source(operator: str, candidate: str) -> str:
    return (SAMPLE_CANDIDATES / operator / f"{candidate}.py").read_text()


def run_candidate(operator: str, source: str, shape_ids: Sequence[str] | None = None,
                  settings: EvaluationSettings = TEST_SETTINGS,
                  warm: WarmChildren | None = None) -> EvaluationResult:
    release = load_release(FIXTURE_RELEASE)
    op = release.operator(operator)
    job = EvaluationRequest(
        operator=op.public, candidate_source=source, tolerance=op.tolerance,
        shape_ids=list(shape_ids) if shape_ids is not None else dev_shapes(operator),
        masked_paths=(release.root,),
    )
    return evaluate(job, settings, warm=warm)
