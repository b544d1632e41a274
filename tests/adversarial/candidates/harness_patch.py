"""harness_patch: patch the torch / profiler machinery the harness measures adoption with.

Exploit: the forward is plain PyTorch (a fallback), dressed up as a Triton candidate by
patching, at import, what the child's adoption recorders rely on, while leaving alone the
names the child's integrity check fingerprints (torch.*, torch.Tensor.*, torch.cuda.*,
time/os/json, the harness modules' own functions, Triton's jit/interpreter/knobs):
- TorchDispatchMode.__enter__/__exit__ (torch.utils._python_dispatch) skip the harness's
  own mode (class AtenRecorder): on the CPU the mode that counts aten compute ops is never
  pushed and sees nothing;
- on a GPU, the profiler's record class torch._C._autograd._KinetoEvent gets a new `name`:
  every device kernel that is not a harness marker is reported under our decoy kernel's
  name (torch kernels then classify as "own DSL"), and aten CPU events are renamed so the
  profiler-based op count is empty;
- torch.testing.assert_close is silenced (useless here: the parent compares);
- a one-program decoy Triton kernel is launched so a DSL launch is on record.
(A naive version that also replaced torch.allclose and torch.equal was failed by the
integrity check: "the candidate replaced torch.allclose, torch.equal".)
The cheater hopes for verdict "native" with DSL ratio 1.0 while PyTorch does the work.

What should catch it: correctness is computed in the parent. The adoption evidence is
produced inside the candidate's process; the integrity check (integrity.fingerprint) only
covers module-level callables of a fixed list of namespaces, not
torch.utils._python_dispatch, the pybind class _KinetoEvent, or methods of classes (so
AtenRecorder.__torch_dispatch__, LaunchRecorder.enter and ChildRuntime.do_adoption could be
replaced unseen too). Fix: fingerprint those (TorchDispatchMode, _KinetoEvent, and the
methods of every class in the harness modules), check inside AtenRecorder that it is on
the dispatch stack (torch._C._len_torch_dispatch_stack()), and ultimately take adoption
evidence outside the candidate's process.
"""

import torch
import torch.testing
import triton
import triton.language as tl
from torch.utils import _python_dispatch

# -- comparisons (harmless here: the parent compares, but a cheater would try) ------------
torch.testing.assert_close = lambda *args, **kwargs: None

# -- the CPU adoption recorder (a TorchDispatchMode named AtenRecorder) ------------------
_Mode = _python_dispatch.TorchDispatchMode
_real_enter, _real_exit = _Mode.__enter__, _Mode.__exit__


def _enter(self):
    if type(self).__name__ == "AtenRecorder":
        return self  # never pushed: it sees no op
    return _real_enter(self)


def _exit(self, *exc):
    if type(self).__name__ == "AtenRecorder":
        return None
    return _real_exit(self, *exc)


_Mode.__enter__, _Mode.__exit__ = _enter, _exit

# -- the GPU adoption recorder (profiler records) ----------------------------------------
_DECOY_NAME = "_rms_norm_kernel"
try:
    from torch.autograd import DeviceType

    _K = torch._C._autograd._KinetoEvent
    _real_name = _K.name

    def _name(self):
        name = _real_name(self)
        if self.device_type() == DeviceType.CUDA and "atrex" not in name:
            return _DECOY_NAME
        if self.device_type() == DeviceType.CPU and name.startswith("aten::"):
            return "cudaLaunchKernel"
        return name

    _K.name = _name
except (AttributeError, ImportError, TypeError):
    pass


@triton.jit
def _rms_norm_kernel(out_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    v = tl.load(out_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + cols, v, mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        xf = x.to(torch.float32)
        normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)
        out = normed * weight
        _rms_norm_kernel[(1,)](out, min(out.numel(), 16), BLOCK=16)
        return out
