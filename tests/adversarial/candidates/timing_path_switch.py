"""timing_path_switch: a correct forward that changes kernels once the checks are over.

Exploit: every call returns the right answer, so no comparison catches it, but the calls
the evaluator observes (five correctness trials, one adoption call) run one kernel and
every later call (warm-up, timing) runs another. Here both are Triton and both correct;
in a real attack the second path is whatever is fastest and not in the DSL (a vendor GEMM,
a torch op), or a kernel tuned to the timing loop's fixed buffers. The observed verdict
and the timed kernels would then belong to different programs.

What should catch it: the names of the kernels every profiled timed call ran (on a CPU:
the DSL launches of the unmeasured calls) must be among those the observed calls ran
(stages/performance._check_timed_kernels): "behaviour changed under timing".
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
def _timed_path_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps,
                       BLOCK: tl.constexpr):
    # the same arithmetic under another name: stands for any path the checks never saw
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * out_stride + cols, (normed * w).to(out_ptr.dtype.element_ty),
             mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.calls = 0

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        kernel = _rms_norm_kernel if self.calls <= 6 else _timed_path_kernel
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, self.eps,
                          BLOCK=block, num_warps=max(1, min(16, block // 256)))
        return out
