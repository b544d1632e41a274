"""try_except_fallback: a Triton path that raises, silently covered by PyTorch.

Exploit: the Triton kernel holds the whole row in one block of exactly `n_cols` elements
(tl.arange needs a power of two), and the forward walks a list of "tuned" configs, each
launch wrapped in try/except; when every config raises (any hidden size that is not a
power of two, e.g. 200 here, 5120 or 14336 in real models) it falls back to PyTorch.
Shapes where the kernel works are native; the others are torch, and the failed launches
still look like DSL launches to a launch counter. The cheater hopes the fallback goes
unnoticed, or that the failed launches tip a launch-count ratio towards "native".

What should catch it: adoption records aten compute ops outside DSL launches; the
fallback shape shows pow/mean/rsqrt/mul... and gets "mixed" or "fallback-torch"
(scored 0). Note the failed launches are counted as own DSL launches
(dsl._wrapped_run counts before the launch runs); counting only launches that returned
would be stricter.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_exact_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, eps,
                           N_COLS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, N_COLS)  # raises unless N_COLS is a power of two
    x = tl.load(x_ptr + row * x_stride + cols).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / N_COLS + eps)
    w = tl.load(w_ptr + cols).to(tl.float32)
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * out_stride + cols, (normed * w).to(out_ptr.dtype.element_ty))


_CONFIGS = ({"num_warps": 1}, {"num_warps": 2}, {"num_warps": 4}, {"num_warps": 8})


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        for config in _CONFIGS:
            try:
                _rms_norm_exact_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0),
                                                  self.eps, N_COLS=n_cols, **config)
                return out
            except Exception:  # noqa: BLE001 - "this config does not compile here"
                continue
        xf = x.to(torch.float32)
        normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)
        return normed * weight
