"""cache_data_ptr: cache outputs keyed by the input tensors' device addresses.

Exploit: the output of a call is kept, keyed by (x.data_ptr(), weight.data_ptr(), shape,
dtype). A later call whose inputs live at the same addresses gets the cached tensor back,
with only a one-program "touch" kernel launched (so the timed forward still holds a
kernel of ours and is not dropped as empty). Timing loops reuse the same few input
buffers (4 rotating sets, and CUDA-graph replay needs fixed addresses), so the cheater
hopes every timed call is a cache hit costing ~2 us.

What should catch it: fresh inputs for every correctness trial; when the allocator hands
a new trial the address of an earlier one, the cached (stale) output is wrong and the
parent's comparison fails it. If addresses never repeat during correctness, nothing on the
CPU catches it: the performance stage (GPU) would need to refresh the input contents in
place between samples and check the outputs of timed calls (timing.measure_forward).
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
        self._cache: dict = {}

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        key = (x.data_ptr(), weight.data_ptr(), tuple(x.shape), x.dtype, x.device)
        out = self._cache.get(key)
        if out is not None:
            _touch(out)
            return out
        out = _rms_norm(x, weight, self.eps)
        self._cache[key] = out
        return out
