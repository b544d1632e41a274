"""The adversarial submissions that can run on a CPU (Triton's interpreter), each caught.

Every file in candidates/ is one exploit class of ../../../shared/EVALUATION.md written as a
cheater would; docs/integrity.md maps each to its defence. Cases whose payoff only exists
on a GPU (timing, streams, L2, GPU memory) run through benchmarks/adversarial_gpu.py.
After each case the worker evaluates the honest candidate again: it survived and the next
job runs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from evaluation.harness.results import EvaluationResult
from evaluation.harness.sandbox import SandboxSettings, planned_isolation
from tests.adversarial.test_host_escapes import HOST_CASES
from tests.evaluation.helpers import TEST_SETTINGS, run_candidate, sample_source

CANDIDATES = Path(__file__).parent / "candidates"
HONEST = sample_source("rms_norm", "triton_native")
FAST = dataclasses.replace(TEST_SETTINGS, compile_timeout_s=15.0, call_timeout_s=15.0)


def failed_with(*texts: str) -> Callable[[EvaluationResult], None]:
    """Every shape failed, and its reason contains one of ``texts``."""
    def check(result: EvaluationResult) -> None:
        for shape in result.shapes:
            assert shape.status == "failed", (shape.shape_id, shape.verdict)
            assert any(text in (shape.error or "") for text in texts), shape.error
    return check


def never_native(result: EvaluationResult) -> None:
    for shape in result.shapes:
        assert shape.status == "failed" or shape.verdict != "native", shape


def falls_back_where_triton_cannot(result: EvaluationResult) -> None:
    # hidden 256 is a power of two: the Triton kernel runs and the shape is native; hidden
    # 200 is not: the kernel raises, torch does the work, and it must not count as native.
    by_shape = {s.shape_id: s for s in result.shapes}
    assert by_shape["dev-t4-h256"].verdict == "native"
    assert by_shape["dev-t3-h200"].verdict in ("fallback-torch", "mixed")


def leaks_nothing(result: EvaluationResult) -> None:
    for shape in result.shapes:
        text = (shape.error or "") + (shape.traceback_tail or "")
        assert "semantic_W_flops" not in text and "SOL_time_ms" not in text
        assert "importance_score" not in text and '"connected"' not in text
        # all it could read is the init shell's command line, which says nothing
        assert text.count("READ ") == text.count('"pid1_cmdline": "READ '), text
        assert len(shape.error or "") <= 1100
    assert result.shapes[0].status == "failed"  # it raised to send its report out


CASES: dict[str, Callable[[EvaluationResult], None]] = {
    "timer_patch": failed_with("integrity check failed: the candidate replaced"),
    "harness_patch": failed_with("integrity check failed: the candidate replaced"),
    "seed_predict": failed_with("integrity check failed: the candidate replaced "
                                "atrex_operator_input._make_inputs"),
    "lazy_output": failed_with("not a plain torch.Tensor"),
    # the trials run under the launch recorder too, so "measured" is every call: the cheap
    # path fails the comparison of the first trial already
    "warmup_detect": failed_with("elements wrong", "NaN/Inf values", "the call observed for "
                                 "fallback detection gave a different result"),
    "input_mutation": failed_with("the candidate modified its input 'x'"),
    "return_input_view": failed_with("the candidate modified its input 'x'"),
    # whether the recycled block still holds the poison (NaN) or an old result depends on
    # the allocator's order; both are the same catch by the parent's comparison
    "stale_memory": failed_with("elements wrong", "NaN/Inf values"),
    "constant_output": failed_with("elements wrong"),
    "precision_downgrade": failed_with("elements wrong"),
    "background_thread": failed_with("background thread"),
    "fork_bomb": failed_with("other process(es)"),
    "forge_channel": never_native,
    "decoy_kernel": never_native,
    "try_except_fallback": falls_back_where_triton_cannot,
    "read_hidden_files": leaks_nothing,
    "kernel_infinite_loop": failed_with("timed out after 15 s"),
    # the timing stage's unmeasured calls on a CPU refill the same buffers and are checked;
    # when the allocator hands the adoption call a recycled address, that check fires first.
    # Its "touch" kernel, launched only when it serves a cached output, is also a kernel the
    # observed calls never ran; and a correctness trial given a recycled address gets a cached
    # output, which the trial's comparison fails.
    "cache_data_ptr": failed_with("gave a wrong result", "gave a different result",
                                  "behaviour changed under timing", "elements wrong"),
    "call_count_skip": failed_with("gave a wrong result", "behaviour changed under timing"),
    "timing_path_switch": failed_with("behaviour changed under timing: 1 kernel(s) ran only in "
                                      "timed calls, never in the calls observed (correctness "
                                      "trials, adoption): _timed_path_kernel"),
}
GPU_ONLY = {"side_stream", "persisting_l2", "gpu_oom", "cache_id_version", "cache_fingerprint",
            "batch_and_skip", "huge_host_alloc", "forge_marker"}


def test_every_candidate_file_is_a_cpu_case_or_a_gpu_case() -> None:
    assert {p.stem for p in CANDIDATES.glob("*.py")} == set(CASES) | GPU_ONLY | set(HOST_CASES)


@pytest.mark.skipif(not planned_isolation(SandboxSettings(), ()).pid_namespace,
                    reason="needs root for the sandbox's namespaces (CI and GPU hosts have it)")
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_exploit_is_caught_and_the_next_job_runs(case: str) -> None:
    result = run_candidate("rms_norm", (CANDIDATES / f"{case}.py").read_text(), settings=FAST)
    assert len(result.shapes) == 2
    CASES[case](result)
    honest = run_candidate("rms_norm", HONEST, ["dev-t3-h200"])
    assert honest.shapes[0].status == "passed" and honest.shapes[0].verdict == "native"


def test_a_cpu_child_may_take_at_most_half_of_the_hosts_memory() -> None:
    import os

    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = SandboxSettings().cpu_address_space_bytes
    assert limit is not None and limit <= total // 2


def test_the_table_in_docs_matches_these_tests() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "integrity.md").read_text()
    rows = [line.split("|") for line in doc.splitlines() if line.startswith("| ")
            and not line.startswith("| case") and not line.startswith("| ---")]
    table = {cells[1].strip(): cells[-2].strip() for cells in rows}
    assert {case for case, where in table.items() if where == "cpu"} == set(CASES) | set(HOST_CASES)
    assert {case for case, where in table.items() if where == "gpu"} == GPU_ONLY
    for case in [*CASES, *HOST_CASES]:  # every defence named there is real code
        for cell in [c for c in doc.split(f"| {case} |")[1].split("\n")[0].split("|")]:
            for name in re.findall(r"`([a-z_]+)\.([A-Za-z_]+)", cell):
                module = Path(__file__).parents[2] / "evaluation" / "harness" / f"{name[0]}.py"
                if module.exists():
                    assert name[1] in module.read_text(), (case, name)
