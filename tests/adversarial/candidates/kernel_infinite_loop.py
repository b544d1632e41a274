"""kernel_infinite_loop: a Triton kernel that never terminates.

Exploit: after computing its row, every program spins on a flag in device memory that
nobody ever sets (a volatile load, so the compiler cannot hoist or delete the loop). On a
GPU the kernel never retires: the launching process blocks in the next synchronize, the
GPU stays busy for other processes, and a CUDA context with a stuck kernel cannot be
interrupted from inside. In the CPU interpreter the loop is an endless Python loop. A
cheater (or a buggy submission) hopes to tie up the worker: hang the evaluation, block the
next shape or the next job on the same GPU.

What should catch it: every request has a wall timeout; on timeout the parent kills the
child's process group and PID namespace (child_process.ChildProcess._cleanup), which also tears
down its CUDA context and stops the kernel; the shape fails with "timed out after N s in
the compile stage" and the next shape starts a new child.

Partly GPU-only: the "GPU kept busy for other processes" part needs a GPU; the hang
itself happens on the CPU too.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_spin_kernel(x_ptr, w_ptr, out_ptr, flag_ptr, x_stride, out_stride, n_cols, eps,
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
    spins = 0
    while tl.load(flag_ptr, volatile=True) == 0:  # the flag is never set
        spins += 1


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        block = triton.next_power_of_2(n_cols)
        _rms_norm_spin_kernel[(n_rows,)](x, weight, out, flag, x.stride(0), out.stride(0),
                                         n_cols, self.eps, BLOCK=block,
                                         num_warps=max(1, min(16, block // 256)))
        return out
