"""precision_downgrade: do the whole norm in fp8 (e4m3) to halve memory traffic.

Exploit: x is rounded to fp8 e4m3 before the sum of squares and the scaling, and the
result is rounded to fp8 before being widened to bf16 for the output (on a GPU the
cheater would store fp8 and read fp8; here the rounding reproduces the numerics). fp8
e4m3 keeps 3 mantissa bits, a relative rounding error of up to 6.25% per rounding, more
than the 5% rtol. The cheater hopes the error averages out in a norm-based or
sampled comparison, or that the tolerance is applied to the mean error.

What should catch it: the parent checks every element against atol + rtol*|ref|
(compare._compare_tensor); elements off by more than that fail the trial.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_fp8_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps,
                         BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x8 = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float8e4nv)
    x = x8.to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float8e4nv).to(tl.float32)
    y = (x * rstd * w).to(tl.float8e4nv)
    tl.store(out_ptr + row * out_stride + cols, y.to(tl.float32).to(out_ptr.dtype.element_ty),
             mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        _rms_norm_fp8_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols,
                                        self.eps, BLOCK=block,
                                        num_warps=max(1, min(16, block // 256)))
        return out
