"""warmup_detect: be correct while checked, take a fast wrong path once measured.

Exploit: the correctness trials are the first calls a Model instance gets and run with no
instrumentation; the adoption call (and on a GPU the timing calls) come later and run
under a recorder. The forward takes the honest Triton path while it is "being checked" and
a cheap path otherwise. "Measured" is detected by: more than 5 calls on this instance,
an active TorchDispatchMode (the CPU adoption recorder), an active autograd profiler (GPU
adoption and timing), a wrapped Triton `run` (the launch recorder), or CUDA graph capture.
The cheap path is still a Triton kernel (so adoption says native) but it skips the
reduction: out = x * weight, i.e. it assumes every row has unit RMS. That is wrong beyond
tolerance, and faster. The cheater hopes correctness sees only honest calls and adoption /
timing see only the cheap kernel.

What should catch it: outputs of every measured call must be verified too. The adoption
call's output is never compared today (child_checks.do_adoption discards it); on the CPU nothing
catches this. Fix: write the adoption call's output and let the parent compare it
(stages/adoption.AdoptionStage._adoption), and make the instrumented calls indistinguishable from correctness
trials (record every correctness trial under the same recorders, or run adoption on one
of the checked trials).
"""

import sys

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


@triton.jit
def _unit_rms_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * out_stride + cols, x * w, mask=mask)


def _being_measured() -> bool:
    from torch.utils import _python_dispatch

    if _python_dispatch._get_current_dispatch_mode() is not None:
        return True
    if getattr(torch.autograd.profiler, "_is_profiler_enabled", False):
        return True
    interpreter = sys.modules.get("triton.runtime.interpreter")
    for cls in (triton.runtime.jit.JITFunction,
                getattr(interpreter, "InterpretedFunction", None)):
        run = getattr(cls, "run", None)
        if run is not None and "wrapped" in getattr(run, "__qualname__", ""):
            return True
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.calls = 0

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls <= 5 and not _being_measured():
            return _rms_norm(x, weight, self.eps)
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        _unit_rms_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols,
                                    BLOCK=block, num_warps=max(1, min(16, block // 256)))
        return out
