"""The profile mode's ncu report parser, on reports recorded on an H200 (2026-12-03,
benchmarks/ncu_profile_record.py): an honest Triton rms_norm, the same operator as a PyTorch
fallback, and a tensor-core Triton GEMM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.harness.isolation import jail
from evaluation.harness.isolation.sandbox import SandboxSettings, planned_isolation
from evaluation.harness.ncu import profile as ncu_profile
from evaluation.harness.ncu import sandbox as ncu_sandbox
from evaluation.harness.ncu.profile import ReportUnreadable, clocks_seen, parse_report
from evaluation.harness.ncu.sandbox import _ProfiledChild, profile_shape
from evaluation.harness.release import load_release
from tests.paths import FIXTURE_RELEASE as FIXTURE

RECORDED = Path(__file__).parent / "data" / "ncu"
HBM_PEAK = 4.8e12  # evaluation/hardware/H200.yaml


def _report(case: str) -> str:
    return (RECORDED / f"ncu-{case}.csv").read_text()


def test_an_honest_triton_kernel_reads_as_one_memory_bound_launch_in_base_units() -> None:
    [kernel] = parse_report(_report("rms_norm-triton"), HBM_PEAK)
    assert kernel.name == "_rms_norm_kernel" and kernel.launch == 0
    assert kernel.duration_s == pytest.approx(40.576e-6)  # "ns", "40,576"
    assert kernel.dram_read_bytes == 84_141_568 and kernel.dram_write_bytes == 61_506_304
    moved = 84_141_568 + 61_506_304
    assert kernel.dram_bytes_per_s == pytest.approx(moved / 40.576e-6)
    assert kernel.dram_of_peak == pytest.approx(moved / 40.576e-6 / HBM_PEAK)
    assert kernel.dram_throughput_pct == pytest.approx(74.69)
    assert kernel.achieved_occupancy_pct == pytest.approx(91.09)
    assert kernel.l2_hit_rate_pct == pytest.approx(50.31)
    assert kernel.limited_by == "L2"  # lts 89% of its peak, above DRAM's 74.7%
    assert kernel.sm_clock_hz == pytest.approx(1_967_724_240.63)


def test_a_fallback_shows_its_vendor_kernels_each_with_its_counters() -> None:
    kernels = parse_report(_report("rms_norm-torch-fallback"), HBM_PEAK)
    assert [k.launch for k in kernels] == list(range(8))
    assert all(k.name.startswith("void ") for k in kernels)  # PyTorch's, none of Triton's
    assert all(k.duration_s and k.duration_s > 0 for k in kernels)
    assert sum(k.duration_s or 0 for k in kernels) > 10 * 40.576e-6
    tiny = [k for k in kernels if (k.duration_s or 1) < 3e-6]
    assert tiny and all(k.limited_by == "latency" for k in tiny)  # no unit near its peak
    clocks = clocks_seen(kernels)
    assert clocks["sm_clock_min_hz"] is not None and clocks["sm_clock_max_hz"] is not None
    assert clocks["sm_clock_min_hz"] <= clocks["sm_clock_max_hz"]


def test_a_tensor_core_gemm_reads_as_compute_bound_on_the_tensor_pipe() -> None:
    [kernel] = parse_report(_report("gemm_fp16-triton"), HBM_PEAK)
    assert kernel.tensor_pipe_pct is not None and kernel.tensor_pipe_pct > 80
    assert kernel.limited_by == "SM (compute)"
    # ncu ran with the clocks left alone: the SM clock it saw is what the GEMM ran at
    assert kernel.sm_clock_hz is not None and kernel.sm_clock_hz < 1.98e9


def test_what_the_program_printed_is_skipped_and_no_table_is_refused() -> None:
    text = "warming up\n" + _report("rms_norm-triton").replace(
        '"0","', 'a line the program printed\n"0","', 1)
    assert len(parse_report(text)) == 1
    with pytest.raises(ReportUnreadable, match="no ncu table"):
        parse_report("==PROF== No kernels were profiled.\n")
    with pytest.raises(ReportUnreadable, match="without the column"):
        parse_report('"ID","Kernel Name"\n"0","k"\n')


def test_the_command_leaves_the_clocks_alone_and_asks_only_for_known_metrics() -> None:
    known = ncu_profile.known_metrics("dram__bytes_read  Counter  # of bytes\n"
                                      "gpu__time_duration  Metric\n")
    assert known == ["gpu__time_duration.sum", "dram__bytes_read.sum"]
    line = ncu_profile.command("ncu", ["python3", "x.py"], known)
    assert line[line.index("--clock-control") + 1] == "none"
    assert line[line.index("--metrics") + 1] == "gpu__time_duration.sum,dram__bytes_read.sum"
    assert line[-2:] == ["python3", "x.py"]


@pytest.mark.skipif(not planned_isolation(SandboxSettings(), ()).private_root,
                    reason="the sandbox's private root needs root and unshare")
def test_a_profile_runs_ncu_inside_the_candidates_jail_after_every_wall(tmp_path: Path) -> None:
    """The order that worked on the H200 (ncu/sandbox.py): root brings the namespace's loopback
    up, setpriv drops to the sandbox uid, the syscall filter goes on, then ncu, writing its
    log where the parent reads it, then the target; the work folder holds the public files,
    the candidate and the one shape, nothing else."""
    operator = load_release(FIXTURE).operator("rms_norm").public
    shape = operator.shape("dev-t4-h256")
    settings = SandboxSettings(workdir_base=tmp_path)
    child = _ProfiledChild(operator=operator, candidate_source="# the candidate\n", shape=shape,
                           ncu_argv=["/usr/local/cuda/bin/ncu", "--clock-control", "none"],
                           settings=settings, dsl="triton")
    try:
        child._make_workdir()
        assert child.workdir is not None
        assert sorted(p.name for p in child.workdir.iterdir()) == [
            "candidate.py", "home", "operator", "profile", "shape.json", "tmp"]
        assert json.loads((child.workdir / "shape.json").read_text()) == {
            "init_kwargs": dict(shape.init_kwargs), "input_kwargs": dict(shape.input_kwargs)}
        assert (child.workdir / "profile").stat().st_uid == settings.child_uid
        script = child._jail_script()
        order = [" up -- ", "/usr/bin/setpriv", f"--reuid={settings.child_uid}", "--no-new-privs",
                 " ncu -- ", "/usr/local/cuda/bin/ncu", "--clock-control none", "--log-file",
                 str(jail.WORK / "profile" / "ncu.csv"), " target"]
        positions = [script.find(part) for part in order]
        assert -1 not in positions and positions == sorted(positions), (order, positions)
    finally:
        child.close()


def test_a_host_without_ncu_answers_a_profile_with_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ncu_sandbox, "find_ncu", lambda: None)
    operator = load_release(FIXTURE).operator("rms_norm").public
    profile = profile_shape(operator, "", operator.shape("dev-t4-h256"), dsl="triton",
                            settings=SandboxSettings(), hbm_peak_bytes_per_s=None)
    assert profile.kernels == [] and profile.error == "this GPU host has no ncu (Nsight Compute)"
