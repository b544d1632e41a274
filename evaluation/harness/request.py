"""What one evaluation is asked to do: the public operator, the candidate, the shapes, and
the settings it runs under; whether the candidate gets the full checks or a reference's.

Imported by every stage (stages/) and by `evaluate`, which takes a request and runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .isolation.sandbox import SandboxSettings
from .release import (
    DEFAULT_DSL,
    DEFAULT_DSL_RATIO_THRESHOLD,
    PublicOperator,
    ShapeSpec,
    Tolerance,
)
from .timing import TimingSettings

FULL_CHECKS, REFERENCE_CHECKS = "full", "reference"  # EvaluationResult.checks


@dataclass(frozen=True)
class EvaluationSettings:
    trials: int = 5
    # A candidate whose source is the operator's own reference.py, byte for byte (the
    # release's PyTorch baseline), is the trusted side's code: it is checked once against
    # itself (trials), its fallback is not observed (it is PyTorch by definition, and a
    # baseline's score counts fallbacks) and one timed call is checked. Its timing is
    # measured as any candidate's is. On the public Atrex-Bench's large shapes the trials
    # and the adoption call cost 70% of a shape (benchmarks/shape_cost.py: block_scaled_mm
    # shape 23, 77 s of trials and 16 s of adoption for a 0.53 s call whose 4.9 GB output
    # crosses from child to parent for every check).
    reference_trials: int = 1
    compile_timeout_s: float = 300.0  # import, instantiate, first call (JIT) and the trials
    call_timeout_s: float = 120.0  # the adoption stage
    timing: TimingSettings = TimingSettings()
    timing_input_sets: int = 4
    timing_input_bytes: int = 2 * 1024**3  # rotate fewer sets for large inputs
    # Above this size of one input set the trusted side judges the correctness trials after
    # the child has run them all, not while it runs the next (device memory, _correctness).
    overlap_input_bytes: int = 1024**3
    device: str | None = None  # "cuda" or "cpu"; None picks the GPU when there is one
    sandbox: SandboxSettings = SandboxSettings()


@dataclass(frozen=True)
class EvaluationRequest:
    """Everything public a GPU host needs to evaluate one candidate on one operator."""

    operator: PublicOperator
    candidate_source: str
    tolerance: Tolerance = Tolerance()
    shape_ids: Sequence[str] | None = None  # None: every shape
    dsl: str = DEFAULT_DSL
    dsl_ratio_threshold: float = DEFAULT_DSL_RATIO_THRESHOLD
    masked_paths: Sequence[Path] = field(default_factory=tuple)  # hidden files on this host
    # The secret from which this evaluation's input seeds derive. None: drawn here. The
    # portal sends one per job attempt so an admin can replay an evaluation exactly.
    seed: int | None = None
    # The release's hidden tier for this operator: run after every public shape, so nothing
    # the candidate learns of them (it sees each one only in that shape's requests; never in
    # its copy of shapes.json) can change a public shape's result.
    hidden_shapes: Sequence[ShapeSpec] = ()

    def shape_spec(self, shape_id: str) -> ShapeSpec:
        for spec in self.hidden_shapes:
            if spec.id == shape_id:
                return spec
        return self.operator.shape(shape_id)


def checks_for(job: EvaluationRequest) -> str:
    """"reference" when the candidate is the operator's reference.py unchanged, else "full"."""
    try:
        reference = (job.operator.directory / "reference.py").read_text(encoding="utf-8")
    except OSError:
        return FULL_CHECKS
    return REFERENCE_CHECKS if job.candidate_source == reference else FULL_CHECKS
