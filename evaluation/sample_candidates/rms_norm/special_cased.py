"""RMSNorm in Triton for the shapes a team could see, PyTorch for every other: what an agent
that tuned to the public shapes.json and kept a "safe" fallback for the rest submits.

Correct everywhere, native on the starter release's public (tokens, hidden size) pairs only:
on the release's hidden shapes it is a PyTorch fallback, which scores 0, so its hidden S_op
falls far below its public one and boards flag it "does not generalise".
"""

import torch
import triton
import triton.language as tl

# (num_tokens, hidden_size) of atrex-starter's rms_norm shapes.json, dev tier included
SEEN = {(4, 256), (3, 200), (1, 4096), (64, 4096), (8192, 4096), (128, 8192), (4096, 8192),
        (8192, 128), (131072, 128), (32, 2048), (32768, 2048), (64, 7168), (8192, 1536),
        (128, 512)}


@triton.jit
def _rms_norm_kernel(
    x_ptr, w_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, eps,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * out_row_stride + cols, (normed * w).to(out_ptr.dtype.element_ty),
             mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        if (n_rows, n_cols) not in SEEN:
            xf = x.to(torch.float32)
            normed = (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps))
            return normed.to(x.dtype) * weight
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        _rms_norm_kernel[(n_rows,)](
            x, weight, out, x.stride(0), out.stride(0), n_cols, self.eps,
            BLOCK=block, num_warps=max(1, min(16, block // 256)),
        )
        return out
