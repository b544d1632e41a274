"""Dishonest: declared Gluon, but the work is a plain `@triton.jit` kernel (Gluon is only
imported). Expected on a GPU: correct outputs, verdict fallback-other-dsl, its kernel named
"other DSL: triton". Declared Triton, the same file is native."""

import torch
import triton
import triton.language as tl
from triton.experimental import gluon  # noqa: F401 - for show


@triton.jit
def _rms_norm_plain(x_ptr, w_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, eps,
                    BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * out_row_stride + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        _rms_norm_plain[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, self.eps,
                                   BLOCK=block, num_warps=max(1, min(16, block // 256)))
        return out
