"""A shape whose reference cannot be held on the device: the shape fails as the release's, the
evaluation goes on; device reports of a release (what a GPU host's check found) read back."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evaluation.harness.evaluate import EvaluationRequest, evaluate
from evaluation.harness.release import load_release
from evaluation.harness.release_check import (
    DEVICE_REPORT_FORMAT,
    DeviceCheck,
    ShapeOnDevice,
    device_findings,
)
from tests.evaluation.helpers import TEST_SETTINGS, sample_source
from tests.paths import FIXTURE_RELEASE

GIB = 1024**3

# What torch raises when a CUDA allocation fails, raised here on the CPU for the wider of the
# two dev shapes: the trusted side's reference is what cannot be held.
OOM_REFERENCE = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] > 200:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 28.00 GiB")
        xf = x.to(torch.float32)
        variance = xf.pow(2).mean(dim=-1, keepdim=True)
        return (xf * torch.rsqrt(variance + self.eps)).to(x.dtype) * weight
'''


@pytest.fixture
def release_with_oom_reference(tmp_path: Path) -> Path:
    root = tmp_path / "release"
    shutil.copytree(FIXTURE_RELEASE, root)
    (root / "data" / "rms_norm" / "reference.py").write_text(OOM_REFERENCE)
    return root


def test_a_reference_out_of_memory_fails_that_shape_as_the_releases_and_the_next_runs(
        release_with_oom_reference: Path) -> None:
    release = load_release(release_with_oom_reference)
    op = release.operator("rms_norm")
    job = EvaluationRequest(operator=op.public, candidate_source=sample_source("rms_norm", "triton_native"),
                        tolerance=op.tolerance, shape_ids=["dev-t4-h256", "dev-t3-h200"],
                        masked_paths=(release.root,))
    result = evaluate(job, TEST_SETTINGS)
    wide, narrow = result.shapes
    assert wide.shape_id == "dev-t4-h256" and wide.status == "failed"
    assert wide.failed_stage == "reference"
    assert wide.error is not None and "cannot be evaluated here, whatever the candidate does" in wide.error
    assert narrow.status == "passed", narrow.error


def test_running_out_of_memory_while_comparing_fails_that_shape_and_the_next_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # as on the H200: the trusted side compared a 6.3 G-element output and ran out of memory
    import torch

    from evaluation.harness.stages import shape as shape_mod

    compare = shape_mod.compare_outputs

    def compare_or_run_out(candidate, reference, atol, rtol):  # type: ignore[no-untyped-def]
        if next(iter(reference.values())).shape[-1] > 200:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 5.89 GiB")
        return compare(candidate, reference, atol, rtol)

    monkeypatch.setattr(shape_mod, "compare_outputs", compare_or_run_out)
    release = load_release(FIXTURE_RELEASE)
    op = release.operator("rms_norm")
    job = EvaluationRequest(operator=op.public, candidate_source=sample_source("rms_norm", "triton_native"),
                        tolerance=op.tolerance, shape_ids=["dev-t4-h256", "dev-t3-h200"],
                        masked_paths=(release.root,))
    wide, narrow = evaluate(job, TEST_SETTINGS).shapes
    assert wide.status == "failed" and wide.failed_stage == "reference"
    assert wide.error is not None and "cannot be evaluated here, whatever the candidate does" in wide.error
    assert narrow.status == "passed", narrow.error


def _report(*shapes: ShapeOnDevice) -> DeviceCheck:
    return DeviceCheck("NVIDIA H200", 140 * GIB, list(shapes))


def test_a_device_report_names_shapes_that_cannot_run_as_problems_and_tight_ones_as_warnings() -> None:
    report = _report(
        ShapeOnDevice("moe", "0", input_bytes=1 * GIB, peak_bytes=5 * GIB, seconds=0.01),
        ShapeOnDevice("moe", "1", input_bytes=11 * GIB, peak_bytes=120 * GIB, error="out of memory"),
        ShapeOnDevice("moe", "2", input_bytes=11 * GIB, peak_bytes=70 * GIB, seconds=0.4),
    )
    problems, warnings = device_findings(report)
    assert [s.shape_id for s in report.cannot_run()] == ["1"]
    assert [s.shape_id for s in report.too_large_to_evaluate()] == ["2"]  # 2 x (70 + 11) > 140
    assert problems == ["data/moe/shapes.json: 1: the reference cannot run on NVIDIA H200 "
                        "(140 GiB): out of memory (peak 120.0 GiB when it stopped)"]
    assert len(warnings) == 1 and "data/moe/shapes.json: 2:" in warnings[0]
    assert "about 162 GiB" in warnings[0]


def test_a_device_report_round_trips_and_refuses_other_documents() -> None:
    report = _report(ShapeOnDevice("moe", "0", input_bytes=GIB, peak_bytes=2 * GIB, seconds=0.5))
    again = DeviceCheck.from_dict(report.to_dict())
    assert again == report and report.to_dict()["format"] == DEVICE_REPORT_FORMAT
    with pytest.raises(ValueError, match="not a device report"):
        DeviceCheck.from_dict({"format": "atrex.evaluation-result/1"})
    with pytest.raises(ValueError, match="malformed device report"):
        DeviceCheck.from_dict({"format": DEVICE_REPORT_FORMAT, "device": "x", "total_bytes": 1,
                               "shapes": [{"operator": "moe", "colour": "red"}]})


@pytest.mark.parametrize(("overlap_input_bytes", "judged_while_the_child_ran"),
                         [(1 << 40, True), (0, False)])
def test_trials_of_a_large_shape_are_judged_after_the_child_ran_them_all(
        overlap_input_bytes: int, judged_while_the_child_ran: bool) -> None:
    """Above overlap_input_bytes the parent computes no reference while the child holds the
    shape on the same device (the trials are judged after its request returned)."""
    from dataclasses import replace
    from unittest import mock

    from evaluation.harness import evaluate as evaluate_mod
    from evaluation.harness.isolation.child_process import ChildProcess
    from tests.evaluation.helpers import run_candidate

    inside: list[tuple[str, bool]] = []  # per judged call: the request then, whether inside it
    state = {"request": ""}
    real_request, real_check = ChildProcess.request, evaluate_mod._ShapeRun._check_trial

    def request(self: ChildProcess, command: dict, *args: object, **kwargs: object) -> dict:
        state["request"] = str(command.get("cmd"))
        try:
            return real_request(self, command, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            state["request"] = ""

    def check(self: object, *args: object, **kwargs: object) -> object:
        inside.append((state["request"], bool(state["request"])))
        return real_check(self, *args, **kwargs)  # type: ignore[arg-type]

    settings = replace(TEST_SETTINGS, overlap_input_bytes=overlap_input_bytes)
    with mock.patch.object(ChildProcess, "request", request), \
            mock.patch.object(evaluate_mod._ShapeRun, "_check_trial", check):
        good = run_candidate("rms_norm", sample_source("rms_norm", "triton_native"),
                             ["dev-t4-h256"], settings=settings)
        judged_in_good = list(inside)
        wrong = run_candidate("rms_norm", sample_source("rms_norm", "wrong"),
                              ["dev-t4-h256"], settings=settings)
    assert good.shapes[0].status == "passed" and good.shapes[0].trials_checked == 5
    assert wrong.shapes[0].status == "failed" and wrong.shapes[0].failed_stage == "correctness"
    assert wrong.shapes[0].error is not None and "5 of 5 trials failed" in wrong.shapes[0].error
    correctness_checks = [within for _, within in inside[:5]]  # the first shape's five trials
    assert correctness_checks == [judged_while_the_child_ran] * 5
    # the checked timed calls (all three on a CPU): judged during the timing request, while
    # the child waits at each hand-over, or copied then and judged after it
    timed = judged_in_good[6:]  # after five trials and the adoption call
    expected = ("timing", True) if judged_while_the_child_ran else ("", False)
    assert timed == [expected] * 3, judged_in_good
