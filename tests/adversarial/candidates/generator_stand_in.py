"""generator_stand_in: pinned seeds without touching `secrets`: a stand-in generator.

Exploit: torch.manual_seed(seed) ends in `default_generator.manual_seed(seed)`, looked up
in torch.random's module globals. A stand-in there turns every seed into 1, so every draw
from the timing stage's first call on gives the same contents whatever seed the harness
was given; a cache keyed by the contents then skips the work (a one-program kernel instead).

What should catch it: the generators' identity in the integrity fingerprint, checked before
every refill; and the parent comparing the first bytes of each checked call's contents with
its own draw of the seed it gave.
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
import hashlib

_real = torch.random.default_generator
_CACHE: dict = {}


class _Pinned:
    """Every manual_seed(seed) becomes manual_seed(1): every draw the same contents."""

    def manual_seed(self, seed):
        return _real.manual_seed(1)

    def __getattr__(self, name):
        return getattr(_real, name)


def _key(x, weight):
    return hashlib.sha1(_raw(x) + _raw(weight)).hexdigest()


def _raw(t):
    return t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()


def _install():
    torch.random.default_generator = _Pinned()


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        _CALLS[0] += 1
        if _CALLS[0] == TIMING_STARTS_AT_CALL:
            _install()
        key = _key(x, weight)
        out = _CACHE.get(key)
        if out is not None and out.shape == x.shape:
            out = out.clone()
            _touch_kernel[(1,)](out, BLOCK=1)  # the work skipped: seen these contents before
            return out
        out = torch.empty_like(x)
        _rms_norm_into(x, weight, out, self.eps)
        _touch_kernel[(1,)](out, BLOCK=1)
        _CACHE[key] = out.clone()
        return out
