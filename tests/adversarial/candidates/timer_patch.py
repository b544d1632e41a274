"""timer_patch: monkeypatch every clock the harness might time us with.

Exploit: at import the candidate replaces
- time.perf_counter (runs at 40% speed: per-call seconds, the time cap, sample estimates),
- torch.cuda.Event.elapsed_time (reports 40% of the real interval: the event-timed median),
- torch.cuda.synchronize (a no-op: eager samples overlap instead of being serialised),
- torch._C._autograd._KinetoEvent.duration_ns (40% of the real duration for device
  records: the profiler kernel records the scored time is computed from; this pybind
  class accepts new attributes),
and then computes honestly in Triton. The cheater hopes for a 2.5x better scored time.

What should catch it: the child's integrity check (integrity.fingerprint, compared after
every request in child_core.ChildCore._check_integrity) fails the shape: "integrity check
failed: the candidate replaced time.perf_counter, torch.cuda.Event.elapsed_time,
torch.cuda.synchronize". Note the _KinetoEvent.duration_ns patch alone is NOT in the
fingerprint (a pybind class outside its namespaces): a candidate applying only that patch
passes unflagged on the CPU, and on a GPU would shrink the scored time (timing_records.device_records
reads event.duration_ns()); only attainment > 1 would notice. Fingerprint
torch._C._autograd._KinetoEvent's methods too.
"""

import time

import torch
import triton
import triton.language as tl

_SCALE = 0.4

# -- wall clock ---------------------------------------------------------------------------
_real_perf_counter = time.perf_counter
_t0 = _real_perf_counter()
time.perf_counter = lambda: _t0 + (_real_perf_counter() - _t0) * _SCALE

# -- CUDA events and synchronize ----------------------------------------------------------
_real_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _real_elapsed(self, end) * _SCALE
torch.cuda.synchronize = lambda device=None: None

# -- profiler records ---------------------------------------------------------------------
try:
    from torch.autograd import DeviceType

    _K = torch._C._autograd._KinetoEvent
    _real_duration = _K.duration_ns

    def _duration_ns(self):
        real = _real_duration(self)
        if self.device_type() == DeviceType.CUDA and "atrex" not in self.name():
            return int(real * _SCALE)  # the harness's L2-sweep markers keep their time
        return real

    _K.duration_ns = _duration_ns
except (AttributeError, ImportError, TypeError):
    pass


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


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        _rms_norm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols,
                                    self.eps, BLOCK=block,
                                    num_warps=max(1, min(16, block // 256)))
        return out
