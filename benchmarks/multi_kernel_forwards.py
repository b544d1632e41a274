"""Multi-kernel Triton forwards for the timing benchmark, each in two variants.

Six public Atrex-Bench operators, each written as a team might write a first version: two
or three Triton kernels with a buffer between them (a row statistic, then its use). Each
comes as `Capturable` and as `RefusesCapture`, the same forward that raises while a CUDA
graph is being captured, so the evaluator times it eagerly. A team gains by refusing
capture if the eager time it is scored by is lower than the replayed one; the evaluator's
scored time (the device span of one forward) must not let it.

Written for this project's measurements; the kernels follow the operators' reference.py
(the public release, unchanged) and are checked against it before they are timed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl


@triton.jit
def _row_rstd(x_ptr, rstd_ptr, n_cols, eps, BLOCK: tl.constexpr, MEAN: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    total = tl.sum(x * x, axis=0)
    if MEAN:
        total = total / n_cols
    tl.store(rstd_ptr + row, tl.math.rsqrt(total + eps))


@triton.jit
def _row_scale(x_ptr, rstd_ptr, w_ptr, out_ptr, n_cols, BLOCK: tl.constexpr,
               WEIGHT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * tl.load(rstd_ptr + row)
    if WEIGHT:
        y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _add(x_ptr, r_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    total = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offsets, total.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _silu(x_ptr, act_ptr, rows, half, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < half
    g = tl.load(x_ptr + row * 2 * half + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(act_ptr + row * half + cols, (g / (1.0 + tl.exp(-g))).to(act_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _mul_up(x_ptr, act_ptr, out_ptr, rows, half, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < half
    up = tl.load(x_ptr + row * 2 * half + half + cols, mask=mask, other=0.0).to(tl.float32)
    act = tl.load(act_ptr + row * half + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * half + cols, (act * up).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _row_mean(x_ptr, mean_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(mean_ptr + row, tl.sum(x, axis=0) / n_cols)


@triton.jit
def _row_centred_rstd(x_ptr, mean_ptr, rstd_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    d = tl.where(mask, x - tl.load(mean_ptr + row), 0.0)
    tl.store(rstd_ptr + row, tl.math.rsqrt(tl.sum(d * d, axis=0) / n_cols + eps))


@triton.jit
def _layer_apply(x_ptr, mean_ptr, rstd_ptr, w_ptr, b_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = (x - tl.load(mean_ptr + row)) * tl.load(rstd_ptr + row) * w + b
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _topk_partial(x_ptr, part_ptr, top_k, hidden, half_k, BLOCK: tl.constexpr, SECOND: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    first = half_k if SECOND else 0
    last = top_k if SECOND else half_k
    for k in range(first, last):
        acc += tl.load(x_ptr + (token * top_k + k) * hidden + cols, mask=mask, other=0.0).to(tl.float32)
    if SECOND:
        acc += tl.load(part_ptr + token * hidden + cols, mask=mask, other=0.0)
    tl.store(part_ptr + token * hidden + cols, acc, mask=mask)


@triton.jit
def _scaled_cast(part_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    y = tl.load(part_ptr + offsets, mask=mask, other=0.0) * scale
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def _warps(block: int) -> int:
    return max(1, min(16, block // 256))


class RmsNorm(torch.nn.Module):
    """rms_norm: per-row 1/rms into a buffer, then the scaled, weighted row (2 kernels)."""

    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = float(eps)

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        rows, cols = x.shape
        block = triton.next_power_of_2(cols)
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        out = torch.empty_like(x)
        _row_rstd[(rows,)](x, rstd, cols, self.eps, BLOCK=block, MEAN=True, num_warps=_warps(block))
        _row_scale[(rows,)](x, rstd, weight, out, cols, BLOCK=block, WEIGHT=True,
                            num_warps=_warps(block))
        return out


class FusedAddRmsNorm(torch.nn.Module):
    """fused_add_rms_norm: the residual sum, its row statistic, the normed row (3 kernels)."""

    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = float(eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor,
                weight: torch.Tensor) -> dict[str, torch.Tensor]:
        rows, cols = x.shape
        block = triton.next_power_of_2(cols)
        summed = torch.empty_like(residual)
        _add[(triton.cdiv(x.numel(), 4096),)](x, residual, summed, x.numel(), BLOCK=4096)
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        out = torch.empty_like(x)
        _row_rstd[(rows,)](summed, rstd, cols, self.eps, BLOCK=block, MEAN=True,
                           num_warps=_warps(block))
        _row_scale[(rows,)](summed, rstd, weight, out, cols, BLOCK=block, WEIGHT=True,
                            num_warps=_warps(block))
        return {"out": out, "residual": summed}


class SiluAndMul(torch.nn.Module):
    """silu_and_mul: silu of the gate half into a buffer, then times the up half (2 kernels)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        half = x.shape[-1] // 2
        act = torch.empty((*x.shape[:-1], half), dtype=x.dtype, device=x.device)
        out = torch.empty_like(act)
        grid = (rows, triton.cdiv(half, 1024))
        _silu[grid](x, act, rows, half, BLOCK=1024)
        _mul_up[grid](x, act, out, rows, half, BLOCK=1024)
        return out


class L2Norm(torch.nn.Module):
    """l2_norm: per-row 1/norm into a buffer, then the scaled row (2 kernels)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows, cols = x.shape
        block = triton.next_power_of_2(cols)
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        out = torch.empty_like(x)
        _row_rstd[(rows,)](x, rstd, cols, self.eps, BLOCK=block, MEAN=False,
                           num_warps=_warps(block))
        _row_scale[(rows,)](x, rstd, x, out, cols, BLOCK=block, WEIGHT=False,
                            num_warps=_warps(block))
        return out


class LayerNorm(torch.nn.Module):
    """layer_norm: row mean, then row 1/std about it, then the affine row (3 kernels)."""

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        cols = x.shape[-1]
        rows = x.numel() // cols
        block = triton.next_power_of_2(cols)
        mean = torch.empty(rows, dtype=torch.float32, device=x.device)
        rstd = torch.empty_like(mean)
        out = torch.empty_like(x)
        _row_mean[(rows,)](x, mean, cols, BLOCK=block, num_warps=_warps(block))
        _row_centred_rstd[(rows,)](x, mean, rstd, cols, 1e-5, BLOCK=block, num_warps=_warps(block))
        _layer_apply[(rows,)](x, mean, rstd, weight, bias, out, cols, BLOCK=block,
                              num_warps=_warps(block))
        return out


class MoeSumReduce(torch.nn.Module):
    """moe_sum_reduce: two half sums over the experts into fp32, then the scaled cast
    (3 kernels)."""

    def __init__(self, routed_scaling_factor: float = 1.0) -> None:
        super().__init__()
        self.scale = float(routed_scaling_factor)

    def forward(self, expert_outputs: torch.Tensor) -> torch.Tensor:
        tokens, top_k, hidden = expert_outputs.shape
        part = torch.empty((tokens, hidden), dtype=torch.float32, device=expert_outputs.device)
        grid = (tokens, triton.cdiv(hidden, 1024))
        _topk_partial[grid](expert_outputs, part, top_k, hidden, top_k // 2, BLOCK=1024, SECOND=False)
        _topk_partial[grid](expert_outputs, part, top_k, hidden, top_k // 2, BLOCK=1024, SECOND=True)
        out = torch.empty((tokens, hidden), dtype=expert_outputs.dtype, device=expert_outputs.device)
        _scaled_cast[(triton.cdiv(part.numel(), 4096),)](part, out, part.numel(), self.scale,
                                                          BLOCK=4096)
        return out


def refusing_capture(cls: type[torch.nn.Module]) -> type[torch.nn.Module]:
    """The same forward, raising while a CUDA graph is captured: timed eagerly."""

    class RefusesCapture(cls):  # type: ignore[misc, valid-type]
        def forward(self, *args: object, **kwargs: object) -> object:
            if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
                raise RuntimeError("this forward refuses CUDA-graph capture")
            return super().forward(*args, **kwargs)

    RefusesCapture.__name__ = f"{cls.__name__}RefusesCapture"
    return RefusesCapture


# operator of the public release -> (forward class, the shape ids timed: small to large)
FORWARDS: dict[str, tuple[type[torch.nn.Module], tuple[str, ...]]] = {
    "rms_norm": (RmsNorm, ("15", "5", "30", "0", "40", "12")),
    "fused_add_rms_norm": (FusedAddRmsNorm, ("1", "3", "6", "9", "12", "0")),
    "silu_and_mul": (SiluAndMul, ("0", "1", "5", "10", "20", "30")),
    "l2_norm": (L2Norm, ("0", "1", "3", "5", "9", "12")),
    "layer_norm": (LayerNorm, ("0", "1", "3", "6", "9", "12")),
    "moe_sum_reduce": (MoeSumReduce, ("0", "1", "2", "3", "4", "6")),
}
Variant = tuple[str, Callable[..., torch.nn.Module]]
