"""RMSNorm as vLLM's RMSNorm.forward_native computes it (bf16 in, fp32 math, bf16 out)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        orig_dtype = x.dtype
        xf = x.to(torch.float32)
        variance = xf.pow(2).mean(dim=-1, keepdim=True)
        normed = (xf * torch.rsqrt(variance + self.eps)).to(orig_dtype)
        # vLLM rounds to the activation dtype before the weight multiply.
        return normed * weight
