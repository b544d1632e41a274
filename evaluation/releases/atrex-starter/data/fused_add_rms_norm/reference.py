"""Residual add fused with RMSNorm, as vLLM's ``RMSNorm.forward(x, residual)``.

Mirrors the CUDA op ``torch.ops._C.fused_add_rms_norm`` (kernel
``vllm::fused_add_rms_norm_kernel``, module ``vllm.model_executor.layers.layernorm``):
the sum ``x + residual`` is rounded to bf16 and becomes the new residual; that rounded sum is
normalised in fp32, rounded to bf16 and multiplied by the weight. vLLM's op works in place
(x becomes the output, residual the new residual); this model returns both as new tensors
and leaves its inputs untouched.
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        new_residual = (x.float() + residual.float()).to(x.dtype)
        s32 = new_residual.float()
        inv_rms = torch.rsqrt(s32.square().mean(dim=-1, keepdim=True) + self.eps)
        out = (s32 * inv_rms).to(x.dtype) * weight
        return {"out": out, "residual": new_residual}
