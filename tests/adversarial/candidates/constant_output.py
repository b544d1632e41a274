"""constant_output: memset the output instead of computing it.

Exploit: RMSNorm of zero-mean inputs has zero mean, and a memset kernel is the cheapest
kernel there is. The forward launches a Triton "fill" kernel that writes a constant
(0.0, the mean of the expected output) into a fresh output, skipping every load of `x`.
The cheater hopes the checker only compares summary statistics (mean, a loose norm, a
few elements, or just shapes/dtypes/NaN), so the write-only kernel scores as a correct,
native, memory-bound kernel running at half the traffic.

What should catch it: the parent compares every element against the reference with
|out - ref| <= atol + rtol*|ref| (compare.compare_outputs) and fails the trial.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _fill_kernel(out_ptr, n, value, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.zeros((BLOCK,), tl.float32) + value, mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = out.numel()
        block = 1024
        _fill_kernel[(triton.cdiv(n, block),)](out, n, 0.0, BLOCK=block)
        return out
