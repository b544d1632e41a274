"""side_stream: launch the real kernel on a private CUDA stream that the caller never waits on.

Exploit: the forward enqueues the RMSNorm kernel on a side stream and returns at once. The
current stream (where the harness records its CUDA events and captures its graph) carries
no work of ours, so an event-timed region or a graph replay on it looks nearly empty.
The cheater hopes to be scored on the (empty) current stream while the real work runs
concurrently and finishes "later", outside the timed window.

What should catch it: the child synchronizes the whole device before reading outputs
(child_core._synchronize), so correctness is unaffected; graph capture of unjoined side-stream
work fails (timing falls back to eager); and the scored time comes from the profiler's
device records of every stream between two L2-sweep markers (timing.forward_spans), not
from events on the current stream.

GPU-only: on the CPU there are no streams and this candidate runs the honest kernel.
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


def _launch(x, weight, out, eps):
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    _rms_norm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps,
                                BLOCK=block, num_warps=max(1, min(16, block // 256)))


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self._side = None

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        if not x.is_cuda:
            _launch(x, weight, out, self.eps)
            return out
        if self._side is None:
            self._side = torch.cuda.Stream(device=x.device)
        main = torch.cuda.current_stream(x.device)
        self._side.wait_stream(main)  # the inputs must be ready; nothing joins back
        with torch.cuda.stream(self._side):
            _launch(x, weight, out, self.eps)
        out.record_stream(self._side)  # keep the allocator from recycling `out` early
        return out
