"""Fallback detection: classify what ran during a forward and give a verdict.

Pure functions over what the sandboxed child recorded: device kernel records (name,
device time), the DSL kernels the candidate's own source launched, aten compute ops and
torch.compile activity. Names seen on an H200 (EVALUATION.md): cuBLAS runs `nvjet_*` /
`cublasLt*`, cuDNN SDPA `cudnn_generated_*`, Inductor `triton_{poi,red,per}_fused_*`,
torch eager `at::native::*` / `*elementwise_kernel*`.

Library kernels (compiled from an installed package's files: FlagGems, Liger-Kernel, fla-core;
libraries.py) are named with their package and version and get a verdict of their own,
`library`, where they did most of the work: not the team's own kernels (the DSL ratio counts
only those), and not a PyTorch fallback either.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .libraries import split_label

NATIVE = "native"
MIXED = "mixed"
FALLBACK_TORCH = "fallback-torch"
FALLBACK_VENDOR = "fallback-vendor"
FALLBACK_COMPILED = "fallback-compiled"
FALLBACK_OTHER_DSL = "fallback-other-dsl"  # the work ran in a DSL other than the declared one
LIBRARY_VERDICT = "library"  # the work ran in an installed library's kernels

OWN = "dsl"
TORCH = "torch"
VENDOR = "vendor"
COMPILED = "compiled"
OTHER_DSL = "other-dsl"
LIBRARY = "library"
KERNEL_NAME_CHARS = 160  # demangled template names run to kilobytes
_FALLBACK_BY_CATEGORY = {TORCH: FALLBACK_TORCH, VENDOR: FALLBACK_VENDOR, COMPILED: FALLBACK_COMPILED,
                         OTHER_DSL: FALLBACK_OTHER_DSL, LIBRARY: LIBRARY_VERDICT}
# CuTe DSL names every kernel it emits so (dsl.CuteAdapter): known without importing it
_CUTE_DSL_PATTERN = re.compile(r"^kernel_cutlass_")

_VENDOR_PATTERN = re.compile(
    r"cublas|nvjet|cutlass|cudnn|xmma|gemm|gemv|flash|fmha|nccl|cusparse|cufft|curand|"
    r"cusolver|magma|rocblas|hipblas|miopen|composable_kernel|aiter|sm\d+_",
    re.IGNORECASE,
)
_INDUCTOR_PATTERN = re.compile(r"^triton_(poi|red|per|tem|for|unk)_")

# Aten ops that allocate, view or describe tensors, or initialise them; a DSL kernel may
# rely on PyTorch for these. Anything else dispatched by the candidate is compute.
ALLOWED_ATEN_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones",
    "new_full", "zero_", "fill_", "view", "_unsafe_view", "reshape", "as_strided",
    "t", "transpose", "permute", "expand", "squeeze", "unsqueeze", "select", "slice",
    "split", "split_with_sizes", "chunk", "unbind", "narrow", "detach", "alias",
    "lift_fresh", "set_", "resize_", "view_as", "unflatten", "flatten", "movedim",
    "is_same_size", "_reshape_alias", "diagonal", "arange", "scalar_tensor",
    "_local_scalar_dense", "is_nonzero", "equal",
})


@dataclass(frozen=True)
class KernelRecord:
    name: str
    device_time_s: float


@dataclass(frozen=True)
class AdoptionEvidence:
    """What the child saw during one forward. Device times exist only on a GPU."""

    dsl_kernel_names: frozenset[str]  # kernels launched from the candidate's own source
    foreign_dsl_launches: tuple[str, ...]  # DSL kernels launched from other code (Inductor)
    kernels: tuple[KernelRecord, ...]  # device kernel records (empty on the CPU)
    aten_ops: Mapping[str, int]  # aten op overload name -> count, issued outside DSL launches
    dsl_launch_count: int
    compiled_frames: int  # torch.compile frames compiled since the candidate was loaded
    device_timed: bool
    dsl: str = "triton"  # the declared DSL
    # kernels of another DSL launched from the candidate's own source: name -> that DSL
    other_dsl_kernels: Mapping[str, str] = field(default_factory=dict)
    other_dsl_launch_count: int = 0
    # kernels of an installed library launched during the forward: name -> "package version"
    library_kernels: Mapping[str, str] = field(default_factory=dict)
    library_launch_count: int = 0


@dataclass(frozen=True)
class AdoptionReport:
    dsl_ratio: float
    verdict: str
    method: str  # "device-time" or "launch-count"
    time_by_category: Mapping[str, float]
    foreign_kernels: tuple[dict[str, object], ...]
    aten_compute_ops: Mapping[str, int]
    dsl_kernels: tuple[str, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Every kernel of the observed forward by name, the candidate's own included: category,
    # launches and device time, longest first (GPU only: the interpreter has no device times).
    kernels: tuple[dict[str, object], ...] = field(default_factory=tuple)
    # The libraries whose kernels ran: package, version, kernel names (and their device
    # time on a GPU), most time (or launches) first.
    libraries: tuple[dict[str, object], ...] = field(default_factory=tuple)


def classify_kernel(name: str, own_dsl_kernels: Iterable[str],
                    other_dsl_kernels: Mapping[str, str] | None = None,
                    dsl: str = "triton", library_kernels: Mapping[str, str] | None = None) -> str:
    if name in set(own_dsl_kernels):
        return OWN
    if name in (library_kernels or {}):
        return LIBRARY
    if name in (other_dsl_kernels or {}) or (dsl != "cute" and _CUTE_DSL_PATTERN.search(name)):
        return OTHER_DSL
    if _INDUCTOR_PATTERN.search(name):
        return COMPILED
    if _VENDOR_PATTERN.search(name):
        return VENDOR
    return TORCH


def aten_compute_ops(aten_ops: Mapping[str, int]) -> dict[str, int]:
    """Keep the ops that do compute (strip namespace and overload before matching)."""
    result = {}
    for op, count in aten_ops.items():
        base = op.split("::")[-1].split(".")[0]
        if base not in ALLOWED_ATEN_OPS:
            result[op] = count
    return result


def adoption_report(evidence: AdoptionEvidence, threshold: float) -> AdoptionReport:
    compute_ops = aten_compute_ops(evidence.aten_ops)
    kernels: tuple[dict[str, object], ...] = ()
    if evidence.device_timed:
        by_category, kernels = _device_time_shares(evidence)
        foreign = tuple(dict(kernel) for kernel in kernels if kernel["category"] != OWN)
        method = "device-time"
    else:
        by_category = _launch_count_shares(evidence, compute_ops)
        foreign = tuple({"name": op, "category": TORCH, "count": n} for op, n in compute_ops.items())
        foreign += tuple({"name": name, "category": OTHER_DSL, "dsl": dsl, "count": 1}
                         for name, dsl in sorted(evidence.other_dsl_kernels.items()))
        foreign += tuple({"name": name, "category": LIBRARY, "library": library, "count": 1}
                         for name, library in sorted(evidence.library_kernels.items()))
        method = "launch-count"
    total = sum(by_category.values())
    ratio = by_category.get(OWN, 0.0) / total if total > 0 else 0.0
    notes = []
    if total == 0:
        notes.append("no device work and no DSL launch observed")
    other = sorted(set(evidence.other_dsl_kernels.values()) | (
        {"cute"} if any(k["category"] == OTHER_DSL and str(k["name"]) not in
                        evidence.other_dsl_kernels for k in kernels) else set()))
    if other:
        notes.append(f"other DSL: {', '.join(other)} (declared: {evidence.dsl})")
    libraries = _libraries(evidence, kernels)
    if libraries:
        notes.append("library kernels: " + ", ".join(
            f"{lib['package']} {lib['version']}".strip() for lib in libraries))
    return AdoptionReport(
        dsl_ratio=ratio,
        verdict=verdict(ratio, by_category, threshold),
        method=method,
        time_by_category=by_category,
        foreign_kernels=foreign,
        aten_compute_ops=compute_ops,
        dsl_kernels=tuple(sorted(evidence.dsl_kernel_names)),
        notes=tuple(notes),
        kernels=kernels,
        libraries=libraries,
    )


def _libraries(evidence: AdoptionEvidence,
               kernels: Sequence[Mapping[str, object]]) -> tuple[dict[str, object], ...]:
    """Per library label: its package, version, kernel names and (GPU) device time."""
    times: dict[str, float] = {}
    for kernel in kernels:
        if kernel["category"] == LIBRARY:
            times[str(kernel["name"])] = float(kernel["device_time_us"])  # type: ignore[arg-type]
    grouped: dict[str, list[str]] = {}
    for name, label in sorted(evidence.library_kernels.items()):
        grouped.setdefault(label, []).append(name)
    rows = []
    for label, names in grouped.items():
        package, version = split_label(label)
        row: dict[str, object] = {"package": package, "version": version, "kernels": names}
        if evidence.device_timed:
            row["device_time_us"] = sum(times.get(n[:KERNEL_NAME_CHARS], 0.0) for n in names)
        rows.append(row)
    rows.sort(key=lambda r: (-float(r.get("device_time_us", 0.0)),  # type: ignore[arg-type]
                             str(r["package"])))
    return tuple(rows)


def verdict(ratio: float, by_category: Mapping[str, float], threshold: float) -> str:
    if by_category.get(OWN, 0.0) > 0 and ratio >= threshold:
        return NATIVE
    if by_category.get(OWN, 0.0) > 0:
        return MIXED
    foreign = {c: t for c, t in by_category.items() if c != OWN and t > 0}
    if not foreign:
        return FALLBACK_TORCH
    # Ties go to the more specific label (a library, another DSL, compiled, then vendor)
    # rather than torch.
    order = (LIBRARY, OTHER_DSL, COMPILED, VENDOR, TORCH)
    dominant = max(foreign, key=lambda c: (foreign[c], -order.index(c)))
    return _FALLBACK_BY_CATEGORY[dominant]


def _device_time_shares(
    evidence: AdoptionEvidence,
) -> tuple[dict[str, float], tuple[dict[str, object], ...]]:
    """Device time per category, and per kernel name (category, launches, time), longest
    first: the foreign kernels among them are the evidence a verdict names."""
    by_category: dict[str, float] = {}
    times: dict[str, float] = {}
    counts: dict[str, int] = {}
    categories: dict[str, str] = {}
    for record in evidence.kernels:
        category = classify_kernel(record.name, evidence.dsl_kernel_names,
                                   evidence.other_dsl_kernels, evidence.dsl,
                                   evidence.library_kernels)
        by_category[category] = by_category.get(category, 0.0) + record.device_time_s
        name = record.name[:KERNEL_NAME_CHARS]
        times[name] = times.get(name, 0.0) + record.device_time_s
        counts[name] = counts.get(name, 0) + 1
        categories[name] = category
    kernels = tuple(
        {"name": name, "category": categories[name], "count": counts[name],
         "device_time_us": times[name] * 1e6,
         **({"dsl": evidence.other_dsl_kernels.get(name, "cute")}
            if categories[name] == OTHER_DSL else {}),
         **({"library": evidence.library_kernels[name]}
            if categories[name] == LIBRARY and name in evidence.library_kernels else {})}
        for name in sorted(times, key=lambda n: -times[n])
    )
    return by_category, kernels


def _launch_count_shares(evidence: AdoptionEvidence, compute_ops: Mapping[str, int]) -> dict[str, float]:
    """Without device times (CPU interpreter) each launch or compute op counts once."""
    shares = {
        OWN: float(evidence.dsl_launch_count),
        TORCH: float(sum(compute_ops.values())),
        COMPILED: float(len(evidence.foreign_dsl_launches) + evidence.compiled_frames),
        OTHER_DSL: float(evidence.other_dsl_launch_count),
        LIBRARY: float(evidence.library_launch_count),
    }
    return {k: v for k, v in shares.items() if v > 0}
