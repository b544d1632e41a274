"""The adversarial submissions that can run on a CPU (Triton's interpreter), each caught.

Every file in candidates/ is one exploit class of ../../../shared/EVALUATION.md written as a
cheater would; docs/integrity.md maps each to its defence. Cases whose payoff only exists
on a GPU (timing, streams, L2, GPU memory) run through benchmarks/adversarial_gpu.py.
After each case the worker evaluates the honest candidate again: it survived and the next
job runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from evaluation.harness.isolation.limits import hierarchy
from evaluation.harness.isolation.sandbox import SandboxSettings, planned_isolation
from evaluation.harness.results import UNVERIFIED_ON_CPU, EvaluationResult, shown_verdict
from tests.adversarial.cases import CASE_SANDBOX, FAST, HOST_CASES
from tests.evaluation.helpers import run_candidate, sample_source

CANDIDATES = Path(__file__).parent / "candidates"
HONEST = sample_source("rms_norm", "triton_native")


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


def processes_capped(result: EvaluationResult) -> None:
    # Starved of CPU by the bomb, the 2-core CI machine may not finish the first call in
    # time: a timeout is the same catch (the shape fails, the namespace dies with it).
    failed_with("other process(es)", "timed out after 15 s")(result)
    if hierarchy() is not None:  # the per-evaluation group says which limit was reached
        assert any("limit of 1024 processes and threads" in (s.error or "")
                   for s in result.shapes), [s.error for s in result.shapes]


def shown_unverified_on_cpu(result: EvaluationResult) -> None:
    for shape in result.shapes:
        assert shape.status == "passed", shape.error
        # the in-process record was switched off: it says native, and nothing shows that
        assert shape.verdict == "native"
        assert shown_verdict(shape.verdict, result.mode) == UNVERIFIED_ON_CPU


def every_folder_capped(result: EvaluationResult) -> None:
    first, second = result.shapes
    assert first.status == "failed" and "raised RuntimeError: filled {" in (first.error or ""), \
        first.error
    filled = json.loads((first.error or "").split("filled ", 1)[1].split("}")[0] + "}")
    slack = 64 * 2**20  # one chunk
    assert filled["/tmp"] <= CASE_SANDBOX.private_tmpfs_bytes < filled["/tmp"] + slack
    assert filled["/dev/shm"] <= CASE_SANDBOX.private_tmpfs_bytes < filled["/dev/shm"] + slack
    own = filled["home"] + filled["tmpdir"] + filled["cache"]
    assert own <= CASE_SANDBOX.scratch_bytes < own + slack, filled
    # the outputs cross in the output area, not the full scratch: the next shape is judged
    assert second.status == "passed", second.error


def area_sealed(result: EvaluationResult) -> None:
    first, second = result.shapes
    assert first.status == "failed" and "raised RuntimeError: area {" in (first.error or ""), \
        first.error
    report = json.loads((first.error or "").split("area ", 1)[1].split("}")[0] + "}")
    size = report["area"].split()[0]
    assert report["shrink"] == report["grow"] == "refused Operation not permitted", report
    assert report["size after"] == size, report  # the parent's mapping is whole
    # 0xFF over the area in every timed call after the first: each checked timed call was
    # judged at its hand-over, before the candidate's next call could rewrite it
    assert second.status == "passed", second.error
    assert second.timing is not None and second.timing["checked_calls"] == 3, second.timing


def syscalls_denied(result: EvaluationResult) -> None:
    for shape in result.shapes:
        outcome = _syscall_report(shape.error)
        assert outcome.pop("unshare -Urm").startswith("failed"), outcome
        assert set(outcome.values()) == {"EPERM"}, outcome


def _syscall_report(error: str | None) -> dict[str, str]:
    assert "raised RuntimeError: syscalls {" in (error or ""), error
    report: dict[str, str] = json.loads((error or "").split("syscalls ", 1)[1].split("}")[0] + "}")
    return report


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
    "fork_bomb": processes_capped,
    "output_bomb": failed_with("output 'out' has shape ("),
    "tmpfs_fill": every_folder_capped,
    "output_area_tamper": area_sealed,
    "denied_syscall": syscalls_denied,
    "cpu_mode_switch": shown_unverified_on_cpu,
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
# Work moved out of the timed window through something left in the process, and seeds steered
# from inside it (issue 40). Each is refused before the harness draws again; every one of them
# passed as native before (but generator_stand_in, new against the parent's seeds). One shape
# each, without the honest job after it: the cases above show the worker survives a failure.
IN_PROCESS_CASES: dict[str, Callable[[EvaluationResult], None]] = {
    "persistent_dispatch_mode": failed_with("left installed a torch dispatch mode"),
    "function_mode": failed_with("left installed a torch function mode"),
    "library_override": failed_with("a kernel registered for aten::copy_"),
    "profile_hook": failed_with("a profile function (sys.setprofile)"),
    "signal_peek": failed_with("a signal handler", "an interval timer"),
    "gc_callback": failed_with("a garbage-collector callback (gc.callbacks)"),
    "guard_disabled": failed_with("the candidate replaced TimedCallFlow._guard"),
    "generator_stand_in": failed_with("the candidate replaced torch.random.default_generator"),
    "pinned_seeds": failed_with("the candidate replaced secrets.randbelow, secrets.randbits"),
    "handover_helper": failed_with("other process(es)"),
}
GPU_ONLY = {"persistent_dispatch_mode_eager", "restore_before_the_end",
            "side_stream", "persisting_l2", "gpu_oom", "cache_id_version", "cache_fingerprint",
            "batch_and_skip", "huge_host_alloc", "forge_marker"}


# GPU-only cases whose candidates are the DSL samples (evaluation/sample_candidates/, run on
# an H200 by benchmarks/dsl_samples.py; the rules have CPU tests in test_dsl_adapters.py)
DSL_SAMPLE_CASES = {
    "other_dsl_in_file": ("rms_norm/gluon_plain_triton.py", "silu_and_mul/triton_native.py"),
    "cute_torch_matmul": ("gemm_fp16/cute_torch_matmul.py",),
}


def test_the_dsl_sample_cases_name_real_samples() -> None:
    samples = Path(__file__).parents[2] / "evaluation" / "sample_candidates"
    for files in DSL_SAMPLE_CASES.values():
        assert all((samples / name).is_file() for name in files), files


def test_every_candidate_file_is_a_cpu_case_or_a_gpu_case() -> None:
    assert {p.stem for p in CANDIDATES.glob("*.py")} == \
        set(CASES) | set(IN_PROCESS_CASES) | GPU_ONLY | set(HOST_CASES)


@pytest.mark.skipif(not planned_isolation(SandboxSettings(), ()).pid_namespace,
                    reason="needs root for the sandbox's namespaces (CI and GPU hosts have it)")
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_exploit_is_caught_and_the_next_job_runs(case: str) -> None:
    result = run_candidate("rms_norm", (CANDIDATES / f"{case}.py").read_text(), settings=FAST)
    assert len(result.shapes) == 2
    CASES[case](result)
    honest = run_candidate("rms_norm", HONEST, ["dev-t3-h200"])
    assert honest.shapes[0].status == "passed" and honest.shapes[0].verdict == "native"


@pytest.mark.skipif(not planned_isolation(SandboxSettings(), ()).pid_namespace,
                    reason="needs root for the sandbox's namespaces (CI and GPU hosts have it)")
@pytest.mark.parametrize("case", sorted(IN_PROCESS_CASES))
def test_what_the_candidate_leaves_in_its_process_is_caught(case: str) -> None:
    result = run_candidate("rms_norm", (CANDIDATES / f"{case}.py").read_text(),
                           ["dev-t4-h256"], settings=FAST)
    assert len(result.shapes) == 1
    IN_PROCESS_CASES[case](result)


NEEDS_ROOT = pytest.mark.skipif(not planned_isolation(SandboxSettings(), ()).pid_namespace,
                                reason="needs root for the sandbox's namespaces")
_PEAK = """
import resource, sys
from pathlib import Path
from tests.adversarial.cases import FAST
from tests.evaluation.helpers import run_candidate
result = run_candidate("rms_norm", Path(sys.argv[1]).read_text(), ["dev-t4-h256"], settings=FAST)
print(result.shapes[0].status, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def _parent_peak_bytes(candidate: Path) -> tuple[str, int]:
    run = subprocess.run([sys.executable, "-c", _PEAK, str(candidate)], capture_output=True,
                         text=True, timeout=300, cwd=Path(__file__).parents[2], check=True)
    status, peak = run.stdout.split()[-2:]
    return status, int(peak)


@NEEDS_ROOT
def test_the_parent_reads_no_more_than_the_expected_outputs(tmp_path: Path) -> None:
    honest = tmp_path / "honest.py"
    honest.write_text(HONEST)
    honest_status, honest_peak = _parent_peak_bytes(honest)
    bomb_status, bomb_peak = _parent_peak_bytes(CANDIDATES / "output_bomb.py")
    assert (honest_status, bomb_status) == ("passed", "failed")
    # The bomb's output is 256 MiB and more, five times per shape; reading it once would
    # show here.
    assert bomb_peak < honest_peak + 128 * 2**20, (honest_peak, bomb_peak)


@NEEDS_ROOT
@pytest.mark.skipif(hierarchy() is None, reason="no control group can be made on this host")
def test_a_process_flood_under_the_sandbox_uid_leaves_the_next_evaluation_its_processes() -> None:
    # 1,100 processes of the sandbox uid, as a fork bomb of another evaluation would leave
    # them: RLIMIT_NPROC (per uid) would starve every later sandbox; pids.max is per group.
    settings = SandboxSettings()
    flood = subprocess.Popen(
        ["setpriv", f"--reuid={settings.child_uid}", f"--regid={settings.child_gid}",
         "--clear-groups", "sh", "-c", "i=0; while [ $i -lt 1100 ]; do sleep 600 & "
         "i=$((i+1)); done; wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while _processes_of(settings.child_uid) < 1100 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _processes_of(settings.child_uid) >= 1100
        honest = run_candidate("rms_norm", HONEST, ["dev-t3-h200"])
        assert honest.shapes[0].status == "passed" and honest.shapes[0].verdict == "native", \
            honest.shapes[0].error
    finally:
        os.killpg(flood.pid, signal.SIGKILL)
        flood.wait()


def _processes_of(uid: int) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                count += 1
        except OSError:
            pass
    return count


@NEEDS_ROOT
def test_without_the_filter_the_sandbox_uid_could_trace_itself_and_read_memory() -> None:
    # What the filter adds (and that syscalls_denied can fail): the kernel alone lets the
    # sandbox's unprivileged uid trace itself and read memory through process_vm_readv.
    settings = dataclasses.replace(FAST, sandbox=dataclasses.replace(CASE_SANDBOX,
                                                                     syscall_filter=False))
    result = run_candidate("rms_norm", (CANDIDATES / "denied_syscall.py").read_text(),
                           ["dev-t4-h256"], settings=settings)
    assert result.isolation["syscall_filter"] is False
    outcome = _syscall_report(result.shapes[0].error)
    assert outcome["ptrace(PTRACE_TRACEME)"] == "ok", outcome
    assert outcome["process_vm_readv"] == "ok", outcome


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
    assert {case for case, where in table.items() if where == "cpu"} == \
        set(CASES) | set(IN_PROCESS_CASES) | set(HOST_CASES)
    assert {case for case, where in table.items() if where == "gpu"} == \
        GPU_ONLY | set(DSL_SAMPLE_CASES)
    for case in [*CASES, *IN_PROCESS_CASES, *HOST_CASES]:  # every defence named is real code
        for cell in [c for c in doc.split(f"| {case} |")[1].split("\n")[0].split("|")]:
            for name in re.findall(r"`([a-z_]+)\.([A-Za-z_]+)", cell):
                # the harness's modules by name, in whichever of its rooms they live
                modules = sorted((Path(__file__).parents[2] / "evaluation" / "harness")
                                 .rglob(f"{name[0]}.py"))
                if modules:
                    assert name[1] in "".join(m.read_text() for m in modules), (case, name)
