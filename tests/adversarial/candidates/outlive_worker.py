"""outlive_worker: keep running after the worker that started it is gone.

Exploit: seen against an earlier sandbox: when the GPU worker was killed outright (OOM
killer, a host restart of the service, SIGKILL), its sandboxed child ran on without a
parent, and the job's work folder (the team's source, outputs) stayed in /dev/shm,
readable by the sandbox uid. This candidate starts a daemon in a new session on import
(double fork, SIGTERM and SIGHUP ignored), then hangs in forward, so the worker is still
evaluating it when it is killed. The cheater hopes the daemon lives on to read the next
candidates' folders on that host, or keeps the GPU busy.

What should catch it: unshare gets SIGKILL when the worker dies (PR_SET_PDEATHSIG, set in
child_process.ChildProcess._limits); the namespace's init, a root shell the candidate cannot
signal or reconfigure, gets SIGKILL when unshare dies (--kill-child); the kernel then
kills every process of the PID namespace. The dead worker's work area is removed by the
next worker that starts on the host (workarea.sweep_stale_areas).
"""

import os
import signal
import time

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


def _rms_norm(x, weight, eps):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    _rms_norm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps,
                                BLOCK=block, num_warps=max(1, min(16, block // 256)))
    return out


def _daemon():
    first = os.fork()
    if first != 0:
        os.waitpid(first, 0)
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while True:
        time.sleep(0.2)


_daemon()


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        while True:
            time.sleep(0.2)
