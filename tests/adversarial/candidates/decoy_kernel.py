"""decoy_kernel: a real-looking Triton kernel that is compiled and launched, but torch works.

Exploit: `_rms_norm_kernel` is a complete Triton RMSNorm. The forward compiles it
(`.warmup`, which on the CPU interpreter goes through the same `run` the launch recorder
wraps) and launches it with a *callable grid*. Triton calls the grid function inside the
launch to size the grid; ours computes the whole RMSNorm with PyTorch into the output
and then returns an empty grid, so the kernel body never runs. On the CPU the harness
skips aten ops issued while a DSL launch is in progress (they normally belong to the
interpreter), so the torch work is invisible and two own DSL launches are on record.
The cheater hopes for "native" with DSL ratio 1.0.

What should catch it: on a GPU the profiler records the torch kernels (at::native
elementwise/reduce) with their device time and no device time for the empty launch:
fallback-torch. On the CPU nothing catches it today. Fix in dsl._wrapped_run /
child_checks.AtenRecorder: do not count warmup=True calls or launches with an empty grid as own
launches, and attribute aten ops inside a launch to the candidate when a candidate.py
frame sits between the launch and the op (grid callables, pre-run hooks), e.g. by
checking the Python stack in AtenRecorder.__torch_dispatch__ or by only excluding ops
issued from triton/runtime/interpreter.py frames.
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


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self._compiled = set()

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        warps = max(1, min(16, block // 256))
        if block not in self._compiled:  # "compile" the kernel for this block size
            _rms_norm_kernel.warmup(x, weight, out, x.stride(0), out.stride(0), n_cols,
                                    self.eps, BLOCK=block, num_warps=warps, grid=(n_rows,))
            self._compiled.add(block)

        def grid(meta):
            xf = x.to(torch.float32)
            normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)
            out.copy_(normed * weight)
            return (0,)  # nothing left for the kernel to do

        _rms_norm_kernel[grid](x, weight, out, x.stride(0), out.stride(0), n_cols, self.eps,
                               BLOCK=block, num_warps=warps)
        return out
