"""handover_helper: a forked helper writes the right output while the child waits.

Exploit (seen 2026-12-04, racy: once in two tries on the CPU): a checked timed call is
saved into the shared output area and handed over; the child then waits for the parent.
The forward returns a marker instead of doing the work and forks a helper, which inherits
the output area's mapping; the helper computes the output and writes it over the marker
in the area while the parent is about to copy it out.

What should catch it: no process but the child at a hand-over (the child's own census
before it hands over; the parent's count of the processes in the child's control group
while it reads), and a fork during timing fails the shape.
"""

import gc
import os
import time

import torch
import triton
import triton.language as tl

MARKER = 3.0  # every element of a skipped call's output, bf16-exact


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


def _area_view():
    for obj in gc.get_objects():
        if type(obj).__name__ == "AreaWriter":
            return obj._mapping._view
    return None


def _helper(x, weight, eps, marker_bytes, right_bytes):
    """In the forked process: find the marker in the area, write the right bytes over it."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        view = _area_view()
        if view is not None:
            raw = view.numpy().tobytes()
            at = raw.find(marker_bytes)
            if at >= 0:
                view[at:at + len(right_bytes)] = torch.frombuffer(bytearray(right_bytes),
                                                                  dtype=torch.uint8)
                os._exit(0)
        time.sleep(0.0005)
    os._exit(0)


_CALLS = [0]
TIMING_STARTS_AT_CALL = 7


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        _CALLS[0] += 1
        out = torch.empty_like(x)
        block = triton.next_power_of_2(x.shape[-1])
        _rms_norm_kernel[(x.shape[0],)](x, weight, out, x.shape[-1], self.eps, BLOCK=block)
        if _CALLS[0] <= TIMING_STARTS_AT_CALL + 1 or x.is_cuda:
            return out  # trials, adoption, warm-up: honest
        # a timed call: hand back a marker, let a helper put the right bytes in later
        marker = torch.full_like(x, MARKER)
        right = out.contiguous().view(torch.uint8).numpy().tobytes()
        first = os.fork()
        if first == 0:  # double fork: the helper is the sandbox init's, no zombie of ours
            if os.fork() == 0:
                _helper(x, weight, self.eps, marker.view(torch.uint8).numpy().tobytes(), right)
            os._exit(0)
        os.waitpid(first, 0)
        return marker
