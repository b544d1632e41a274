"""stale_memory: skip the work and return a fresh buffer that still holds an old result.

Exploit: the first call computes honestly. Later calls allocate the output with
torch.empty_like and, when the allocator hands back the address of a buffer that earlier
held one of our results (freed since), skip the kernel (one-program "touch" kernel only)
and return the uninitialised buffer, betting that it still holds a correct result. In a
timing loop with the same inputs and a caching allocator that recycles the output block
of the previous call, that bet usually pays; it is the classic "reference result left in
freed memory" exploit when the reference runs in the same process.

What should catch it: the reference is computed in the parent, never in the child; the
child fills the memory the allocator hands out next with 0xFF (NaN) before each call
(child_core.poison); and inputs differ between trials, so a recycled old result is wrong.
Either way the parent's comparison fails the trial (NaN or values outside tolerance).
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
        self._held_results: set = set()  # addresses that once held one of our outputs

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        key = (out.data_ptr(), tuple(x.shape), x.dtype)
        if self._held_results and (key in self._held_results or len(self._held_results) > 1):
            _touch(out)  # bet on what the recycled block still holds
            return out
        out = _rms_norm(x, weight, self.eps)
        self._held_results.add((out.data_ptr(), tuple(x.shape), x.dtype))
        return out
