"""The profile mode's ncu report parser, on reports recorded on an H200 (2026-12-03,
benchmarks/ncu_profile_record.py): an honest Triton rms_norm, the same operator as a PyTorch
fallback, and a tensor-core Triton GEMM."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.harness import ncu_profile
from evaluation.harness.ncu_profile import ReportUnreadable, clocks_seen, parse_report

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
