"""signal_peek: an interval timer whose handler runs inside the harness's own work.

Exploit: SIGALRM every 200 us; Python runs the handler between two bytecodes of whatever
the main thread is doing, the harness's refill and sweep included. The handler watches the
timing buffers and, when their contents change, computes the output before the timed
window opens. (Racy: a call whose refill the handler missed is computed honestly.)

What should catch it: the signal handlers and interval timers checked before every refill.
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
import signal

_SEEN: dict = {}


def _peek(signum, frame):
    for ptr, (x, weight, out, eps) in list(_PAIRS.items()):
        mark = (float(x.reshape(-1)[0]), float(weight[0]))
        if _SEEN.get(ptr) != mark:  # new contents: compute while the harness goes on
            _SEEN[ptr] = mark
            _torch_rms_norm_into(x, weight, out, eps)
            _READY.add(out.data_ptr())


def _install():
    signal.signal(signal.SIGALRM, _peek)
    signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)


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
