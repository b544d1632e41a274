"""cpu_mode_switch: switch the CPU's adoption record off from inside, beside a decoy kernel.

Exploit: the torch math runs inside torch.utils._python_dispatch._disable_current_modes(),
which pops every Python dispatch mode (the harness's aten recorder among them) for its
block and puts them back after; a one-program Triton kernel that rewrites one element
unchanged keeps a DSL launch on record. On the CPU the recorder sees no torch compute, so
the DSL ratio is 1.0 and the verdict "native" (seen before the fix). On a GPU the device
records show the torch kernels whatever the Python modes: mixed, DSL ratio 0.02.

What should catch it: nothing a CPU can trust, since any record kept in the candidate's
own process can be switched off from inside it. A CPU verdict of "native" is shown as
"unverified-cpu" in the portal, its API and the command lines, never as "native".
"""

import torch
import triton
import triton.language as tl
from torch.utils._python_dispatch import _disable_current_modes


@triton.jit
def _touch_kernel(out_ptr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    v = tl.load(out_ptr + cols)
    tl.store(out_ptr + cols, v)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        with _disable_current_modes():
            xf = x.to(torch.float32)
            normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)
            out = normed * weight
        _touch_kernel[(1,)](out, BLOCK=1)
        return out
