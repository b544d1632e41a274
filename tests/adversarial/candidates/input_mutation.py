"""input_mutation: use the input activation as scratch space.

Exploit: the kernel writes each row's normalised (pre-weight) values back into `x` as it
goes and then computes the output from them, so no separate fp32 temporary is needed and
(on a GPU) large rows need fewer registers. The output itself is correct. The cheater
hopes nobody checks that `x` is left alone; in a real model the caller still needs `x`
(the residual stream), so this corrupts the model and is not a legal optimisation.

What should catch it: the child compares every input bitwise before and after the call
(child._bitwise_equal) and reports changed inputs; the parent fails the trial with
"the candidate modified its input 'x'" since the reference leaves `x` unchanged.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_scratch_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps,
                             BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    normed = (x * rstd).to(x_ptr.dtype.element_ty)
    tl.store(x_ptr + row * x_stride + cols, normed, mask=mask)  # scratch: overwrite x
    normed = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * out_stride + cols, (normed * w).to(out_ptr.dtype.element_ty),
             mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        _rms_norm_scratch_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols,
                                            self.eps, BLOCK=block,
                                            num_warps=max(1, min(16, block // 256)))
        return out
