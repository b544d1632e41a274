"""batch_and_skip: do the work of several future calls in one call, skip those calls.

Exploit: every input set the forward has seen is remembered (weak references, with its
version counter). When a call finds no precomputed result for its own inputs, it computes
the result for its inputs AND for every other remembered input set that is still alive
and unchanged, back to back, and parks those results. The next call on one of those sets
pops its parked result and only launches a one-program "touch" kernel. A timing loop that
rotates N input sets then sees one expensive call followed by N-1 nearly free ones: the
median sample is a free one. Results are consumed once, so a set is recomputed each round
(it is not a plain cache).

What should catch it: on the CPU each call gets fresh inputs and the earlier ones are dead,
so each call computes only its own result: the candidate is honest there and nothing can
catch it. On a GPU the timing stage should score the total device time of a full rotation
(sum over N consecutive samples / N) or refresh input contents between samples, and check
outputs of timed calls (timing.measure_forward); attainment > 1 may flag it.
"""

import weakref

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
        self._seen: dict = {}  # id(x) -> (weakref x, weakref weight, x._version, w._version)
        self._parked: dict = {}  # id(x) -> (versions, output)

    def _alive(self):
        for key, (xr, wr, xv, wv) in list(self._seen.items()):
            x, w = xr(), wr()
            if x is None or w is None or x._version != xv or w._version != wv:
                del self._seen[key]
                self._parked.pop(key, None)
            else:
                yield key, x, w

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        key = id(x)
        parked = self._parked.pop(key, None)
        if parked is not None and parked[0] == (x._version, weight._version) \
                and self._seen.get(key, (None,))[0]() is x:
            _touch(parked[1])
            return parked[1]
        self._seen[key] = (weakref.ref(x), weakref.ref(weight), x._version, weight._version)
        out = _rms_norm(x, weight, self.eps)
        for other, ox, ow in self._alive():  # the batch: every other live input set
            if other != key and other not in self._parked:
                self._parked[other] = ((ox._version, ow._version), _rms_norm(ox, ow, self.eps))
        return out
