"""cache_fingerprint: cache outputs keyed by a hash of a few input values.

Exploit: key = shape + dtype + the bytes of a handful of sampled elements of x (first and
last row, a middle row) and of weight. Reading 40 elements is far cheaper than reading the
whole input, and two different random inputs practically never share those values, so
the cache is "safe" across fresh correctness inputs. In a timing loop that rotates a few
fixed input sets every call after the first for each set is a hit: the cached output is
returned with only a one-program "touch" kernel. The cheater hopes for a ~2 us time.

What should catch it: nothing on the CPU (each call there has new random inputs, so the
cache never hits and the candidate is honest). On a GPU, only refreshing input contents
between timed samples and checking outputs of timed calls (timing.measure_forward), or the
attainment > 1 tripwire, would catch it.
"""

import hashlib

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


def _fingerprint(x, weight):
    rows = x.shape[0]
    picks = (x[0, :8], x[rows // 2, :8], x[rows - 1, -8:], weight[:8], weight[-8:])
    # Views and .tolist() only: no aten compute op for an op counter to see.
    raw = repr([p.view(torch.int16).tolist() for p in picks]).encode()
    return (tuple(x.shape), x.dtype, x.device, hashlib.blake2b(raw, digest_size=16).hexdigest())


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self._cache: dict = {}

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        key = _fingerprint(x, weight)
        out = self._cache.get(key)
        if out is not None:
            _touch(out)
            return out
        out = _rms_norm(x, weight, self.eps)
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = out
        return out
