"""A plausible but wrong Triton RMSNorm: it forgets eps and never applies the weight."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols)
    tl.store(out_ptr + row * out_row_stride + cols, (x * rstd).to(out_ptr.dtype.element_ty),
             mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        _rms_norm_kernel[(n_rows,)](x, out, x.stride(0), out.stride(0), n_cols,
                                    BLOCK=triton.next_power_of_2(n_cols))
        return out
