"""forge_marker: name the real kernel like the harness's end-of-sample marker.

Exploit: the scored time is the span of device records between the harness's start marker
(its L2 sweep kernel) and its end marker (`_atrex_sample_end`), found by kernel name. A
Triton kernel's device name is its function name, so this candidate does its work in a
kernel called `_atrex_sample_end`: the span would close before the work and the sample
would hold only a tiny first kernel of ours.

What should catch it: the markers must come in order (start, forward returned, end), one set per sample
(timing_records.forward_windows raises MarkersForged otherwise), which fails the performance stage;
behind that, attainment > 1 would quarantine it. GPU-only: on a CPU there are no device
records and this candidate is an honest kernel with an odd name.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _atrex_sample_end(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * out_stride + cols, (normed * w).to(out_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _touch_kernel(out_ptr, BLOCK: tl.constexpr):
    # One program that rewrites a few output elements unchanged: keeps a kernel of ours
    # in every timed forward, so the sample is not dropped as empty.
    cols = tl.arange(0, BLOCK)
    v = tl.load(out_ptr + cols)
    tl.store(out_ptr + cols, v)


def _rms_norm(x, weight, eps):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    _atrex_sample_end[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps,
                                BLOCK=block, num_warps=max(1, min(16, block // 256)))
    return out


def _touch(out):
    _touch_kernel[(1,)](out, BLOCK=1)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        _touch(x)  # a first, tiny kernel of ours opens the span
        return _rms_norm(x, weight, self.eps)
