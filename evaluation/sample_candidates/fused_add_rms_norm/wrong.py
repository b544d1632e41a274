"""A plausible but wrong Triton fused add + RMSNorm: it normalises x instead of x + residual."""

import torch
import triton
import triton.language as tl


@triton.jit
def _fused_add_rms_norm_kernel(
    x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, row_stride, n_cols, eps, BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    res = tl.load(res_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    out_ty = out_ptr.dtype.element_ty
    tl.store(res_out_ptr + row * row_stride + cols, (x + res).to(out_ty), mask=mask)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * row_stride + cols, (x * rstd * w).to(out_ty), mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        new_residual = torch.empty_like(residual)
        _fused_add_rms_norm_kernel[(n_rows,)](
            x, residual, weight, out, new_residual, x.stride(0), n_cols, self.eps,
            BLOCK=triton.next_power_of_2(n_cols),
        )
        return {"out": out, "residual": new_residual}
