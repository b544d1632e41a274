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


def _compare_tensor(
    key: str, cand: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float
) -> tuple[bool, float, float, str | None]:
    if cand.numel() == 0:
        return True, 0.0, 0.0, None
    # float32 holds every fp8/bf16/fp16 value exactly and keeps large GPU outputs cheap;
    # float64 only where the reference itself is float64 (and for integers beyond 2**24).
    wide = ref.dtype == torch.float64 or not ref.is_floating_point()
    dtype = torch.float64 if wide else torch.float32
    c = cand.detach().to(device=ref.device, dtype=dtype)
    r = ref.detach().to(dtype)
    ref_finite = torch.isfinite(r)
    bad_nonfinite = ~torch.isfinite(c) & ref_finite
    # Where the reference itself is NaN/Inf the candidate must match it exactly.
    mismatched_special = ~ref_finite & ~((c == r) | (torch.isnan(c) & torch.isnan(r)))
    diff = torch.where(ref_finite & torch.isfinite(c), (c - r).abs(), torch.zeros_like(r))
    rel = diff / r.abs().clamp_min(1e-12)
    abs_err = float(diff.max())
    rel_err = float(torch.where(diff > 0, rel, torch.zeros_like(rel)).max())
    if bool(bad_nonfinite.any()):
        count = int(bad_nonfinite.sum())
        return False, float("inf"), float("inf"), \
            f"output '{key}' has {count} NaN/Inf values where the reference is finite"
    if bool(mismatched_special.any()):
        return False, abs_err, rel_err, f"output '{key}' differs where the reference is NaN/Inf"
    outside = diff > atol + rtol * r.abs()
    if bool(outside.any()):
        count = int(outside.sum())
        # The tolerance is hidden metadata of the release: teams learn how many elements
        # are wrong and by how much, never the bound they were held to.
        return False, abs_err, rel_err, (
            f"output '{key}': {count} of {diff.numel()} elements wrong (max abs error "
            f"{abs_err:.4g}, max rel error {rel_err:.4g})")
    return True, abs_err, rel_err, None


def _fail(reason: str, key: str | None = None) -> Comparison:
    return Comparison(False, float("inf"), float("inf"), key, reason)
