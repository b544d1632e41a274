"""SwiGLU activation as vLLM's SiluAndMul.forward_native: silu(gate) * up."""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        return F.silu(x[..., :d]) * x[..., d:]
