"""return_input_view: normalise in place and return the input's memory under a new name.

Exploit: the kernel writes the result into `x` itself (no output allocation, half the
memory traffic of a separate output buffer on the write side), and the forward returns a
tensor over x's memory that is not `x` and not an obvious view of it: on the CPU a
tensor rebuilt through NumPy (a different storage object at the same address); on a GPU
an empty tensor `set_` onto x's storage. The cheater hopes alias checks compare tensor or
storage identity and miss it, and that the in-place write is taken as an allowed fusion.

What should catch it: the child reports outputs whose memory overlaps an input's storage
by address range (child_core._overlaps -> "aliases") and inputs changed bitwise; the parent
fails the trial ("modified its input 'x'" or "output 'out' is (a view of) input 'x'").
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_inplace_kernel(x_ptr, w_ptr, x_stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    normed = (x * rstd).to(x_ptr.dtype.element_ty).to(tl.float32)
    tl.store(x_ptr + row * x_stride + cols, (normed * w).to(x_ptr.dtype.element_ty),
             mask=mask)


def _disguised_alias(x: torch.Tensor) -> torch.Tensor:
    if x.device.type == "cpu":
        # Same bytes, new storage object: not x, not x.view(...), no ._base.
        return torch.from_numpy(x.view(torch.int16).numpy()).view(torch.bfloat16)
    return torch.empty(0, dtype=x.dtype, device=x.device).set_(
        x.untyped_storage(), x.storage_offset(), x.shape, x.stride())


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        _rms_norm_inplace_kernel[(n_rows,)](x, weight, x.stride(0), n_cols, self.eps,
                                            BLOCK=block, num_warps=max(1, min(16, block // 256)))
        return _disguised_alias(x)
