"""SwiGLU activation of a dense MLP, as vLLM's ``SiluAndMul``.

Mirrors ``vllm.model_executor.layers.activation.SiluAndMul`` (CUDA op
``torch.ops._C.silu_and_mul``, kernel ``vllm::act_and_mul_kernel<silu_kernel>``): the input
is the fused gate_up projection output [T, 2d]; gate = x[:, :d], up = x[:, d:];
out = silu(gate) * up, where silu is computed in fp32 and rounded to bf16 before the
multiply by up (as vLLM's kernel does).
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        gate = x[..., :d].float()
        act = (gate * torch.sigmoid(gate)).to(x.dtype)
        return act * x[..., d:]
