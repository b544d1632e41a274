"""rms_norm through Liger-Kernel: its RMSNorm forward in "gemma" casting mode with offset 0,
which multiplies by the weight in fp32 before the one cast, as the reference does."""

import torch
from liger_kernel.ops.rms_norm import rms_norm_forward


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-06) -> None:
        super().__init__()
        self.eps = float(eps)

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return rms_norm_forward(x, weight, self.eps, 0.0, "gemma", False)[0]
