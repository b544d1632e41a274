"""Roofline arithmetic: pure functions over a shape's W/Q and a hardware profile.

SOL = max(compute time, (Q_read + Q_write) / B_hbm), the compute time made of each precision
path's W_d / P_peak[path(d)] as the release's roofline.json declares (`compute_overlap`):
"sum" (default, Atrex-Bench's formula) adds them all; "max" adds only paths that share an
execution unit and takes the longest unit, since tensor cores and CUDA cores work concurrently.
"""

from __future__ import annotations

from dataclasses import dataclass

from .release import (
    COMPUTE_OVERLAP_SUM,
    DTYPE_TO_PEAK_PATH,
    PEAK_PATH_UNIT,
    HardwareSpec,
    ReleaseError,
    ShapeRoofline,
)


@dataclass(frozen=True)
class RooflinePoint:
    sol_s: float
    compute_s: float
    memory_s: float
    arithmetic_intensity: float  # FLOP per byte of semantic traffic
    regime: str  # "compute", "memory" or "balanced" (see `regime`)


@dataclass(frozen=True)
class Attainment:
    attainment: float  # SOL / measured; > 1 is physically impossible
    attainment_with_floor: float  # (SOL + launch floor) / measured, capped at 1
    suspicious: bool


def roofline_point(shape: ShapeRoofline, hardware: HardwareSpec) -> RooflinePoint:
    unit_s: dict[str, float] = {}  # execution unit -> its time at peak
    for dtype, flops in shape.w_flops.items():
        path = DTYPE_TO_PEAK_PATH[dtype]
        if path not in hardware.peak_flops:
            raise ReleaseError(f"hardware {hardware.name}", f"p_peak.{path}",
                               f"missing, needed for W dtype {dtype}")
        unit = PEAK_PATH_UNIT[path]
        unit_s[unit] = unit_s.get(unit, 0.0) + flops / hardware.peak_flops[path]
    if shape.compute_overlap == COMPUTE_OVERLAP_SUM:
        compute_s = sum(unit_s.values())
    else:  # units overlap: the longest one bounds the kernel
        compute_s = max(unit_s.values(), default=0.0)
    memory_s = (shape.q_read_bytes + shape.q_write_bytes) / hardware.hbm_bytes_per_s
    return RooflinePoint(
        sol_s=max(compute_s, memory_s),
        compute_s=compute_s,
        memory_s=memory_s,
        arithmetic_intensity=arithmetic_intensity(shape),
        regime=regime(compute_s, memory_s),
    )


def arithmetic_intensity(shape: ShapeRoofline) -> float:
    """W / Q: FLOP per byte of semantic traffic (read and written), infinite without traffic."""
    traffic = shape.q_read_bytes + shape.q_write_bytes
    return sum(shape.w_flops.values()) / traffic if traffic else float("inf")


# Atrex-Bench calls a shape balanced when its compute and memory times are within 5% of each
# other: neither unit alone bounds it.
BALANCED_BAND = 0.05
MEMORY, COMPUTE, BALANCED = "memory", "compute", "balanced"


def regime(compute_s: float, memory_s: float) -> str:
    """The one definition of a shape's regime: whether its compute or its memory time at
    peak is the longer, "balanced" within BALANCED_BAND. The compute time is the one the SOL
    uses (its precision paths combined as the release's roofline.json declares)."""
    if compute_s > memory_s * (1 + BALANCED_BAND):
        return COMPUTE
    if memory_s > compute_s * (1 + BALANCED_BAND):
        return MEMORY
    return BALANCED if compute_s > 0 else MEMORY


def dominant_peak_path(shape: ShapeRoofline, hardware: HardwareSpec) -> str | None:
    """The precision path whose work takes longest at its peak (None without compute work):
    the peak a compute-bound shape's attainment is read against when it is told as a FLOP
    rate (attainment x that peak)."""
    path_s: dict[str, float] = {}
    for dtype, flops in shape.w_flops.items():
        path = DTYPE_TO_PEAK_PATH[dtype]
        if flops > 0 and hardware.peak_flops.get(path):
            path_s[path] = path_s.get(path, 0.0) + flops / hardware.peak_flops[path]
    return max(path_s, key=lambda p: path_s[p]) if path_s else None


def sol_seconds(shape: ShapeRoofline, hardware: HardwareSpec) -> float:
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
