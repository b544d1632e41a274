"""cache_id_version: cache outputs keyed by the Python identity and version of the inputs.

Exploit: key = (id(x), x._version, id(weight), weight._version). The inputs are kept alive
in the cache so their ids cannot be recycled by new tensors (no false hits), and the
version counter catches ordinary in-place updates. A timing loop that calls the forward
again and again on the same input tensor objects gets the cached output with only a
one-program "touch" kernel launched. The cheater hopes for a ~2 us scored time.

What should catch it: on the CPU every call gets new input objects (5 correctness trials,
1 adoption call), so the cache never hits and the candidate is honest there: nothing can
catch it on the CPU. On a GPU the performance stage would have to refresh input contents
between samples without the version counter seeing it (x.data.copy_ or a copy kernel) and
verify the outputs of timed calls (timing.measure_forward), or rely on attainment > 1.
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


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self._cache: dict = {}

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        key = (id(x), x._version, id(weight), weight._version)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is x and hit[1] is weight:
            _touch(hit[2])
            return hit[2]
        out = _rms_norm(x, weight, self.eps)
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = (x, weight, out)  # holding x and weight pins their ids
        return out
