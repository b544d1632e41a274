"""The evaluation result: what a GPU host reports, versioned for the portal to store.

`SCHEMA_VERSION` names the JSON layout; `result_schema.json` beside this file is its JSON
Schema. Bump the version when a field changes meaning or disappears.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

SCHEMA_VERSION = "atrex.evaluation-result/2"
EVALUATOR_VERSION = "0.1.0"
SCHEMA_PATH = Path(__file__).resolve().parent / "result_schema.json"

PASSED = "passed"
FAILED = "failed"


MAX_ERROR_CHARS = 1000

CPU_INTERPRETER = "cpu-interpreter"
NATIVE = "native"
# On the CPU the evidence for "native" is the harness's record of aten ops dispatched
# outside DSL launches, which code inside the candidate's process can switch off (seen:
# torch math under torch.utils._python_dispatch._disable_current_modes() beside a decoy
# Triton kernel got "native"). A GPU run sees device kernels, which the candidate cannot
# hide; a CPU run's "native" is shown as this instead, never as "native".
UNVERIFIED_ON_CPU = "unverified-cpu"


def shown_verdict(verdict: str | None, mode: str) -> str:
    """The verdict as the portal, its API and the command lines show it."""
    if verdict == NATIVE and mode == CPU_INTERPRETER:
        return UNVERIFIED_ON_CPU
    return verdict or ""


@dataclass
class ShapeReport:
    shape_id: str
    status: str = FAILED  # passed: compiled and correct (verdict and time are separate)
    stage_reached: str | None = None
    failed_stage: str | None = None
    error: str | None = None
    traceback_tail: str | None = None
    trials_checked: int = 0
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    worst_output: str | None = None
    adoption: dict[str, Any] | None = None
    timing: dict[str, Any] | None = None
    roofline: dict[str, Any] | None = None
    child_restarts: int = 0
    # GPU, driver, CUDA, torch and DSL versions, and (where the shape was timed) the SM and
    # memory clocks read before and after the timing stage (harness/environment.py)
    environment: dict[str, Any] | None = None
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # Where the shape's seconds went, step by step (harness/steps.py): {"seconds": {step:
    # s}, "counts": {step: n}}; diagnostic, never scored.
    steps: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShapeReport:
        """One shape's report read back from JSON (a progress report, a result's shapes): a
        key this version does not know is left out, a missing one takes its default, and a
        report without a shape id names none ("")."""
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        values.setdefault("shape_id", "")
        return cls(**values)

    @property
    def verdict(self) -> str | None:
        return self.adoption["verdict"] if self.adoption else None

    def fail(self, stage: str, message: str, traceback_tail: str = "") -> None:
        self.status = FAILED
        self.failed_stage = stage
        # Messages come from candidate code (exception texts) and are shown to teams:
        # bounded, so an error cannot carry a large dump out of the sandbox.
        if len(message) > MAX_ERROR_CHARS:
            message = message[:MAX_ERROR_CHARS] + f" … ({len(message) - MAX_ERROR_CHARS} more " \
                "characters cut)"
        self.error = message
        self.traceback_tail = traceback_tail or None


@dataclass
class EvaluationResult:
    operator: str
    dsl: str
    device: str  # e.g. "NVIDIA H200" or "cpu"
    mode: str  # "gpu" or "cpu-interpreter"
    candidate_sha256: str
    started_at: str
    finished_at: str | None = None
    seconds: float = 0.0
    isolation: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    shapes: list[ShapeReport] = field(default_factory=list)
    child_start_seconds: list[float] = field(default_factory=list)
    hardware: str | None = None  # the profile the roofline was computed for, if any
    # "full", or "reference": the candidate was the operator's reference.py unchanged, checked
    # once and not observed for fallback (request.EvaluationSettings.reference_trials)
    checks: str = "full"
    schema: str = SCHEMA_VERSION
    evaluator_version: str = EVALUATOR_VERSION

    def to_dict(self) -> dict[str, Any]:
        return json_safe(asdict(self))  # type: ignore[no-any-return]

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvaluationResult:
        if data.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"unsupported result schema {data.get('schema')!r}")
        values = dict(data)
        values["shapes"] = [ShapeReport.from_dict(s) for s in data["shapes"]]
        return cls(**values)


def json_safe(value: Any) -> Any:
    """JSON has no NaN/Infinity: a non-finite number is stored as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
