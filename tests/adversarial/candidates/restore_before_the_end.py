"""restore_before_the_end: every check in the child switched off, then put back unseen (GPU).

Exploit: the attacker reads the harness. At the first timed call it
- registers a kernel for aten::copy_ (as library_override) that computes each refilled
  call's output during the refill, before the timed window opens;
- swaps the code of the timing flow's own check (`TimedCallFlow.check.__code__`) for a
  no-op's, so nothing in the child looks before a refill;
- replaces `json.dumps`, which the child's channel uses, to notice the harness's last
  question of the timing stage ("last": true) and undo all three there, before the child's
  end-of-request integrity check runs, which then finds everything as it was.
The forward is one tiny Triton kernel on every refilled call.

What should catch it: the device. In every profiled sample, the activity between two
samples must be the harness's own, against the kernels the trusted parent's rehearsal of
that work launched (timing_records.check_gaps, timing_records.GapAllowance): the override's torch kernels
in the gaps fail the shape as work outside the timed window. (A captured graph of one tiny
kernel is also refused by the capture check: its replay does not reproduce the outputs, so
the forward is timed eagerly.)
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
import gc
import json

_real_dumps = json.dumps
_UNDO: list = []


def _copy(self, src, non_blocking=False):
    with torch._C._AutoDispatchBelowAutograd():
        torch.ops.aten.copy_.default(self, src, non_blocking)
    _precompute(self)
    return self


def _no_check(self):
    return None


def _dumps(obj, *args, **kwargs):
    if isinstance(obj, dict) and obj.get("event") == "ask" and obj.get("last"):
        for undo in reversed(_UNDO):  # the harness's last question: put everything back
            undo()
        _UNDO.clear()
    return _real_dumps(obj, *args, **kwargs)


def _install():
    library = torch.library.Library("aten", "IMPL")
    for key in ("AutogradCPU", "AutogradCUDA"):
        library.impl("copy_", _copy, key)
    _UNDO.append(library._destroy)
    for obj in gc.get_objects():
        if type(obj).__name__ == "TimedCallFlow":
            check = type(obj).check
            original = check.__code__
            check.__code__ = _no_check.__code__
            _UNDO.append(lambda check=check, original=original: setattr(check, "__code__",
                                                                        original))
            break
    json.dumps = _dumps
    _UNDO.append(lambda: setattr(json, "dumps", _real_dumps))


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
