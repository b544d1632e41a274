"""Roofline arithmetic on hand-computed cases."""

from __future__ import annotations

import pytest

from evaluation.harness.release import (
    HardwareSpec,
    ReleaseError,
    ShapeRoofline,
    load_release,
    project_hardware_profiles,
)
from evaluation.harness.roofline import (
    attainment,
    dominant_peak_path,
    roofline_point,
    sol_seconds,
)
from tests.paths import FIXTURE_RELEASE

H200 = project_hardware_profiles()["H200"]


def test_a_big_gemm_is_compute_bound_at_the_bf16_peak() -> None:
    n = 8192
    shape = ShapeRoofline(w_flops={"bf16": 2 * n**3}, q_read_bytes=2 * 2 * n * n,
                          q_write_bytes=2 * n * n)
    point = roofline_point(shape, H200)
    assert point.compute_s == pytest.approx(2 * n**3 / 989e12)
    assert point.memory_s == pytest.approx(6 * n * n / 4.8e12)
    assert point.sol_s == point.compute_s and point.regime == "compute"
    assert point.arithmetic_intensity == pytest.approx(2 * n**3 / (6 * n * n))


def test_an_rmsnorm_is_memory_bound() -> None:
    shape = ShapeRoofline(w_flops={"fp32": 4 * 4096 * 4096}, q_read_bytes=2 * 4096 * 4096 + 8192,
                          q_write_bytes=2 * 4096 * 4096)
    assert sol_seconds(shape, H200) == pytest.approx((4 * 4096 * 4096 + 8192) / 4.8e12)
    assert roofline_point(shape, H200).regime == "memory"


def test_compute_times_of_several_precisions_add_up() -> None:
    shape = ShapeRoofline(w_flops={"fp8_e4m3": 1979 * 10**9, "bf16": 989 * 10**9},
                          q_read_bytes=0, q_write_bytes=1)
    # 1 ms on the fp8 path plus 1 ms on the bf16 path.
    assert sol_seconds(shape, H200) == pytest.approx(2e-3)


def test_compute_times_add_up_when_the_file_declares_no_overlap() -> None:
    entry = {"semantic_W_flops": {"fp8_e4m3": 1979 * 10**9, "fp32": 67 * 10**9},
             "semantic_Q_read_bytes": 0, "semantic_Q_write_bytes": 1}
    # Atrex-Bench's files have no "compute_overlap": 1 ms on the tensor cores + 1 ms on fp32.
    assert sol_seconds(ShapeRoofline.from_json(entry, {"shapes": {}}), H200) == \
        pytest.approx(2e-3)
    assert sol_seconds(ShapeRoofline.from_json(entry), H200) == pytest.approx(2e-3)


def test_the_dominant_path_is_the_one_whose_work_takes_longest_at_its_peak() -> None:
    # 1 ms of fp8 work against 2 ms of bf16 work: a FLOP rate is told at the bf16 peak.
    shape = ShapeRoofline(w_flops={"fp8_e4m3": 1979 * 10**9, "bf16": 2 * 989 * 10**9},
                          q_read_bytes=0, q_write_bytes=1)
    assert dominant_peak_path(shape, H200) == "bf16_tc"
    assert dominant_peak_path(ShapeRoofline(w_flops={}, q_read_bytes=1, q_write_bytes=1),
                              H200) is None


def test_units_overlap_when_the_file_says_max() -> None:
    entry = {"semantic_W_flops": {"fp8_e4m3": 1979 * 10**9, "fp32": 2 * 67 * 10**9},
             "semantic_Q_read_bytes": 0, "semantic_Q_write_bytes": 1}
    shape = ShapeRoofline.from_json(entry, {"compute_overlap": "max"})
    # 1 ms on the tensor cores under 2 ms on the CUDA cores: the CUDA cores bound it.
    point = roofline_point(shape, H200)
    assert point.sol_s == pytest.approx(2e-3) and point.compute_s == pytest.approx(2e-3)


def test_paths_that_share_the_tensor_cores_still_add_up_under_max() -> None:
    shape = ShapeRoofline(w_flops={"fp8_e4m3": 1979 * 10**9, "bf16": 989 * 10**9,
                                   "fp32": 67 * 10**9},
                          q_read_bytes=0, q_write_bytes=1, compute_overlap="max")
    # fp8 and bf16 MMAs take turns on the same tensor cores (2 ms); fp32 runs beside (1 ms).
    assert sol_seconds(shape, H200) == pytest.approx(2e-3)


def test_memory_time_still_bounds_an_overlapping_shape() -> None:
    shape = ShapeRoofline(w_flops={"bf16": 989 * 10**6, "fp32": 67 * 10**6},
                          q_read_bytes=48 * 10**8, q_write_bytes=0, compute_overlap="max")
    point = roofline_point(shape, H200)
    assert point.sol_s == point.memory_s == pytest.approx(1e-3)


def test_an_unknown_compute_overlap_is_an_error() -> None:
    entry = {"semantic_W_flops": {}, "semantic_Q_read_bytes": 1, "semantic_Q_write_bytes": 1}
    with pytest.raises(ReleaseError, match="compute_overlap: must be one of sum, max"):
        ShapeRoofline.from_json(entry, {"compute_overlap": "min"})


def test_a_missing_precision_path_is_an_error_not_a_default() -> None:
    partial = HardwareSpec(name="X", arch=None, peak_flops={"bf16_tc": 1e15},
                              hbm_bytes_per_s=1e12, launch_floor_s=0)
    shape = ShapeRoofline(w_flops={"fp8_e4m3": 1}, q_read_bytes=1, q_write_bytes=1)
    with pytest.raises(ReleaseError, match="p_peak.fp8_e4m3_tc"):
        sol_seconds(shape, partial)


def test_attainment_above_one_is_suspicious() -> None:
    honest = attainment(sol_s=1e-6, measured_s=2e-6, launch_floor_s=2e-6)
    assert honest.attainment == pytest.approx(0.5)
    assert honest.attainment_with_floor == 1.0  # (1 + 2) / 2 capped
    assert not honest.suspicious
    impossible = attainment(sol_s=2e-6, measured_s=1e-6, launch_floor_s=0)
    assert impossible.attainment == pytest.approx(2.0) and impossible.suspicious


def test_the_launch_floor_lifts_tiny_shapes() -> None:
    tiny = attainment(sol_s=10e-9, measured_s=4e-6, launch_floor_s=2e-6)
    assert tiny.attainment == pytest.approx(0.0025)
    assert tiny.attainment_with_floor == pytest.approx(0.5025)


def test_fixture_sol_times_agree_with_the_roofline_function() -> None:
    release = load_release(FIXTURE_RELEASE)
    checked = 0
    for op in release.operators.values():
        assert op.roofline is not None
        for shape_id, roofline in op.roofline.items():
            for sku, sol_ms in roofline.sol_ms.items():
                expected = sol_seconds(roofline, release.hardware[sku]) * 1e3
                assert sol_ms == pytest.approx(expected, rel=1e-6), (op.name, shape_id, sku)
                checked += 1
    assert checked > 100
