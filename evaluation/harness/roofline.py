"""Roofline arithmetic: pure functions over a shape's W/Q and a hardware profile.

SOL = max(sum_d W_d / P_peak[path(d)], (Q_read + Q_write) / B_hbm). Compute times of
several precision paths add up (an fp8 GEMM with a bf16 epilogue runs both), then the
larger of compute and memory time is the speed of light.
"""

from __future__ import annotations

from dataclasses import dataclass

from .release import DTYPE_TO_PEAK_PATH, HardwareProfile, ReleaseError, ShapeRoofline


@dataclass(frozen=True)
class RooflinePoint:
    sol_s: float
    compute_s: float
    memory_s: float
    arithmetic_intensity: float  # FLOP per byte of semantic traffic
    regime: str  # "compute" or "memory"


@dataclass(frozen=True)
class Attainment:
    attainment: float  # SOL / measured; > 1 is physically impossible
    attainment_with_floor: float  # (SOL + launch floor) / measured, capped at 1
    suspicious: bool


def roofline_point(shape: ShapeRoofline, hardware: HardwareProfile) -> RooflinePoint:
    compute_s = 0.0
    for dtype, flops in shape.w_flops.items():
        path = DTYPE_TO_PEAK_PATH[dtype]
        if path not in hardware.peak_flops:
            raise ReleaseError(f"hardware {hardware.name}", f"p_peak.{path}",
                               f"missing, needed for W dtype {dtype}")
        compute_s += flops / hardware.peak_flops[path]
    traffic = shape.q_read_bytes + shape.q_write_bytes
    memory_s = traffic / hardware.hbm_bytes_per_s
    total_flops = sum(shape.w_flops.values())
    intensity = total_flops / traffic if traffic else float("inf")
    return RooflinePoint(
        sol_s=max(compute_s, memory_s),
        compute_s=compute_s,
        memory_s=memory_s,
        arithmetic_intensity=intensity,
        regime="compute" if compute_s > memory_s else "memory",
    )


def sol_seconds(shape: ShapeRoofline, hardware: HardwareProfile) -> float:
    return roofline_point(shape, hardware).sol_s


def attainment(sol_s: float, measured_s: float, launch_floor_s: float) -> Attainment:
    if measured_s <= 0:
        raise ValueError("measured time must be positive")
    raw = sol_s / measured_s
    return Attainment(
        attainment=raw,
        attainment_with_floor=min(1.0, (sol_s + launch_floor_s) / measured_s),
        suspicious=raw > 1.0,
    )
