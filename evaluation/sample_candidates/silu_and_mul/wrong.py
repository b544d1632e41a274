"""A plausible but wrong Triton SiluAndMul: it swaps the halves, computing silu(up) * gate."""

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, d, x_row_stride, out_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    up = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    gate = tl.load(x_ptr + row * x_row_stride + d + cols, mask=mask, other=0.0).to(tl.float32)
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + row * out_row_stride + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, two_d = x.shape
        d = two_d // 2
        out = torch.empty((n_rows, d), dtype=x.dtype, device=x.device)
        block = min(1024, triton.next_power_of_2(d))
        _silu_and_mul_kernel[(n_rows, triton.cdiv(d, block))](
            x, out, d, x.stride(0), out.stride(0), BLOCK=block)
        return out
