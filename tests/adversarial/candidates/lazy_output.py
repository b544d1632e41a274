"""lazy_output: return a tensor subclass that only computes when someone looks at it.

Exploit: the forward launches nothing. It returns a `_Deferred` tensor (a torch.Tensor
subclass with __torch_function__) that remembers its inputs; the first torch function
applied to it (a comparison, .cpu(), .detach(), torch.save's storage access) runs the
Triton kernel and hands back a plain tensor. `_Deferred.__class__` also claims to be
torch.Tensor so that isinstance-style checks accept it. The cheater hopes the timed
forward contains no kernel at all while the output still compares equal when inspected.

What should catch it: the child checks `type(output) is torch.Tensor` (child.py
_checked_outputs) before anything touches the output, and fails the call with "output
'out' is a _Deferred, not a plain torch.Tensor".
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


def _compute(x, weight, eps, out):
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    _rms_norm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps,
                                BLOCK=block, num_warps=max(1, min(16, block // 256)))


class _Deferred(torch.Tensor):
    @staticmethod
    def __new__(cls, x, weight, eps):
        self = torch.Tensor._make_subclass(cls, torch.empty_like(x))
        self._pending = (x, weight, eps)
        return self

    @property
    def __class__(self):  # isinstance(t, torch.Tensor) and t.__class__ look plain
        return torch.Tensor

    def _materialise(self):
        pending = self.__dict__.get("_pending")
        if pending is not None:
            self.__dict__["_pending"] = None
            with torch._C.DisableTorchFunctionSubclass():
                _compute(*pending, self)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for arg in list(args) + list((kwargs or {}).values()):
            if isinstance(arg, _Deferred):
                arg._materialise()
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return _Deferred(x, weight, self.eps)
