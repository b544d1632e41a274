"""call_count_skip: do the work while the checks last, then stop working.

Exploit: an evaluator typically calls the forward a fixed number of times to check it (five
correctness trials, one observed call) before it starts timing. This candidate counts its
calls and, from the seventh on, returns a fresh uninitialised buffer after a one-program
"touch" kernel: every timed call would cost ~2 us while every checked call was honest.

What should catch it: the outputs of timed calls are checked too, at random and after the
call returned (timed_calls.CallPlan, in the parent); on a CPU every unmeasured call is checked, so
the first one after the skipping starts fails the shape.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps,
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
    _rms_norm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps,
                                BLOCK=block, num_warps=max(1, min(16, block // 256)))
    return out


def _touch(out):
    _touch_kernel[(1,)](out, BLOCK=1)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.calls = 0

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > 6:
            out = torch.empty_like(x)
            _touch(out)
            return out
        return _rms_norm(x, weight, self.eps)
