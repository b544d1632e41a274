"""persistent_dispatch_mode: work moved outside the timed window by a dispatch mode left on.

Exploit (seen on an H200, 2026-12-04: public rms_norm, 56 of 56 shapes `native`, S_op
0.766 against 0.48 for an honest kernel, none flagged): the first timed call pushes a
TorchDispatchMode and never pops it. The harness refills the timing buffers in place with
`copy_` between samples; the mode sees each refill and computes the right output right
there, in torch, into the output buffer the forward keeps, before the L2 sweep and the
start marker. The forward (and the CUDA graph captured from it) is one tiny Triton kernel.

What should catch it: the child's state checked before every refill (a mode left on the
dispatch stack fails the shape), the refill run with Python dispatch off, and on a GPU the
device's records of every profiled sample's gap (work outside the timed window).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, (normed * w).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _touch_kernel(out_ptr, BLOCK: tl.constexpr):
    # one program rewriting one element unchanged: a DSL kernel on record in every call
    cols = tl.arange(0, BLOCK)
    tl.store(out_ptr + cols, tl.load(out_ptr + cols))


def _rms_norm_into(x, weight, out, eps):
    block = triton.next_power_of_2(x.shape[-1])
    _rms_norm_kernel[(x.shape[0],)](x, weight, out, x.shape[-1], eps, BLOCK=block,
                                    num_warps=max(1, min(16, block // 256)))


def _torch_rms_norm_into(x, weight, out, eps):
    # the work the cheat moves out of the timed window, in plain torch
    xf = x.to(torch.float32)
    normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    out.copy_(normed * weight)


_CALLS = [0]
# 5 correctness trials and the adoption call come first: the 7th call is the timing
# stage's first warm-up call (the harness's order, read from its source)
TIMING_STARTS_AT_CALL = 7
from torch.utils._python_dispatch import TorchDispatchMode


class _Peek(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.copy_.default:
            _precompute(args[0])
        return result


def _install():
    _Peek().__enter__()  # never exited: it stays on the dispatch stack


_PAIRS: dict = {}  # weight.data_ptr() -> (x, weight, out, eps): the buffers the timing loop reuses
_READY: set = set()  # out.data_ptr() whose contents a hook already computed for the new inputs


def _precompute(dst):
    """Called from the hook when the harness copies new contents into `dst`: the weight
    buffer is refilled after x (the harness's dict order), so both are new now."""
    pair = _PAIRS.get(dst.data_ptr())
    if pair is not None:
        x, weight, out, eps = pair
        _torch_rms_norm_into(x, weight, out, eps)
        _READY.add(out.data_ptr())


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self._outs: dict = {}

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        _CALLS[0] += 1
        if _CALLS[0] == TIMING_STARTS_AT_CALL:
            _install()
        out = self._outs.get(weight.data_ptr())
        if out is None or out.shape != x.shape or out.dtype != x.dtype:
            out = self._outs[weight.data_ptr()] = torch.empty_like(x)
        _PAIRS[weight.data_ptr()] = (x, weight, out, self.eps)
        capturing = x.is_cuda and torch.cuda.is_current_stream_capturing()
        if capturing or out.data_ptr() in _READY:
            # the captured graph (GPU) and every refilled call: one tiny kernel, the output
            # already written by the hook before the timed window opened
            _READY.discard(out.data_ptr())
            _touch_kernel[(1,)](out, BLOCK=1)
            return out
        _rms_norm_into(x, weight, out, self.eps)
        _touch_kernel[(1,)](out, BLOCK=1)
        return out
