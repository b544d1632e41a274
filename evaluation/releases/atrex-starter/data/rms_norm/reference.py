"""RMSNorm without a residual, as vLLM's ``RMSNorm`` layer computes it.

Mirrors ``vllm.model_executor.layers.layernorm.RMSNorm.forward(x)`` (CUDA op
``torch.ops._C.rms_norm``, kernel ``vllm::rms_norm_kernel``): bf16 in, the mean of squares and
the normalisation in fp32, the normalised value rounded to the activation dtype, then
multiplied by the bf16 weight.
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        inv_rms = torch.rsqrt(x32.square().mean(dim=-1, keepdim=True) + self.eps)
        # Rounded to bf16 before the weight multiply, as vLLM does.
        return (x32 * inv_rms).to(x.dtype) * weight
