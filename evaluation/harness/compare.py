"""Correctness: compare a candidate's outputs with the trusted reference's.

Runs on the trusted side only; the child never sees reference outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

Outputs = Mapping[str, torch.Tensor]
SINGLE_OUTPUT_KEY = "out"  # key used when a model returns one tensor


@dataclass(frozen=True)
class Comparison:
    passed: bool
    max_abs_error: float
    max_rel_error: float
    worst_output: str | None
    reason: str | None  # why it failed, in words a team can act on


def as_output_dict(value: object) -> dict[str, torch.Tensor] | None:
    """Normalise a tensor, a dict of tensors or a tuple of tensors ("out0", "out1", ...);
    None when the structure is not allowed."""
    if isinstance(value, torch.Tensor):
        return {SINGLE_OUTPUT_KEY: value}
    if isinstance(value, dict) and value and all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items()
    ):
        return dict(value)
    # Some public references return a tuple (e.g. a quantised tensor and its scales):
    # positions become names, for the reference and the candidate alike.
    if isinstance(value, tuple | list) and value and all(
            isinstance(v, torch.Tensor) for v in value):
        return {f"{SINGLE_OUTPUT_KEY}{i}": v for i, v in enumerate(value)}
    return None


def compare_outputs(candidate: Outputs, reference: Outputs, atol: float, rtol: float) -> Comparison:
    if set(candidate) != set(reference):
        return _fail(f"output keys {sorted(candidate)} differ from the reference's {sorted(reference)}")
    worst_abs, worst_rel, worst_key = 0.0, 0.0, None
    for key in sorted(reference):
        cand, ref = candidate[key], reference[key]
        if cand.shape != ref.shape:
            return _fail(f"output '{key}' has shape {tuple(cand.shape)}, expected {tuple(ref.shape)}",
                         key)
        if cand.dtype != ref.dtype:
            return _fail(f"output '{key}' has dtype {cand.dtype}, expected {ref.dtype}", key)
        ok, abs_err, rel_err, reason = _compare_tensor(key, cand, ref, atol, rtol)
        if abs_err >= worst_abs:
            worst_abs, worst_key = abs_err, key
        worst_rel = max(worst_rel, rel_err)
        if not ok:
            return Comparison(False, abs_err, rel_err, key, reason)
    return Comparison(True, worst_abs, worst_rel, worst_key, None)


# Elements compared at a time. Each comparison works in float32 (or float64) copies with a
# few temporaries of their size; over a whole multi-GB output that is several times the
# output again (an H200 ran out of memory comparing a 6.3 G-element fp8 output: 136 GiB in
# the trusted process). A chunk's temporaries stay near a GiB whatever the output's size.
COMPARE_CHUNK_ELEMENTS = 1 << 26


@dataclass
class _Tally:
    """What the chunks of one output found, combined before a verdict is given."""
    nonfinite: int = 0  # NaN/Inf where the reference is finite
    special_mismatch: bool = False  # differs where the reference is NaN/Inf
    outside: int = 0  # beyond atol + rtol * |reference|
    abs_err: float = 0.0
    rel_err: float = 0.0


def _compare_tensor(
    key: str, cand: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float,
    chunk_elements: int = COMPARE_CHUNK_ELEMENTS,
) -> tuple[bool, float, float, str | None]:
    if cand.numel() == 0:
        return True, 0.0, 0.0, None
    # float32 holds every fp8/bf16/fp16 value exactly and keeps large GPU outputs cheap;
    # float64 only where the reference itself is float64 (and for integers beyond 2**24).
    wide = ref.dtype == torch.float64 or not ref.is_floating_point()
    dtype = torch.float64 if wide else torch.float32
    flat_cand = cand.detach().reshape(-1)
    flat_ref = ref.detach().reshape(-1)
    tally = _Tally()
    for start in range(0, flat_ref.numel(), chunk_elements):
        stop = start + chunk_elements
        _tally_chunk(tally, flat_cand[start:stop].to(device=ref.device, dtype=dtype),
                     flat_ref[start:stop].to(dtype), atol, rtol)
    abs_err, rel_err = tally.abs_err, tally.rel_err
    if tally.nonfinite:
        return False, float("inf"), float("inf"), \
            f"output '{key}' has {tally.nonfinite} NaN/Inf values where the reference is finite"
    if tally.special_mismatch:
        return False, abs_err, rel_err, f"output '{key}' differs where the reference is NaN/Inf"
    if tally.outside:
        # The tolerance is hidden metadata of the release: teams learn how many elements
        # are wrong and by how much, never the bound they were held to.
        return False, abs_err, rel_err, (
            f"output '{key}': {tally.outside} of {ref.numel()} elements wrong (max abs error "
            f"{abs_err:.4g}, max rel error {rel_err:.4g})")
    return True, abs_err, rel_err, None


def _tally_chunk(tally: _Tally, c: torch.Tensor, r: torch.Tensor, atol: float, rtol: float) -> None:
    ref_finite = torch.isfinite(r)
    tally.nonfinite += int((~torch.isfinite(c) & ref_finite).sum())
    # Where the reference itself is NaN/Inf the candidate must match it exactly.
    tally.special_mismatch |= bool(
        (~ref_finite & ~((c == r) | (torch.isnan(c) & torch.isnan(r)))).any())
    diff = torch.where(ref_finite & torch.isfinite(c), (c - r).abs(), torch.zeros_like(r))
    rel = diff / r.abs().clamp_min(1e-12)
    tally.abs_err = max(tally.abs_err, float(diff.max()))
    tally.rel_err = max(tally.rel_err, float(torch.where(diff > 0, rel, torch.zeros_like(rel)).max()))
    tally.outside += int((diff > atol + rtol * r.abs()).sum())


def _fail(reason: str, key: str | None = None) -> Comparison:
    return Comparison(False, float("inf"), float("inf"), key, reason)
