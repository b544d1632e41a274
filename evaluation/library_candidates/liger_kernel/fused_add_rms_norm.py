"""fused_add_rms_norm through Liger-Kernel: one kernel writes the sum and the normalised sum
(gemma casting mode, offset 0: the weight applied in fp32, as the reference does)."""

import torch
from liger_kernel.ops.fused_add_rms_norm import fused_add_rms_norm_forward


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-06) -> None:
        super().__init__()
        self.eps = float(eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor,
                weight: torch.Tensor) -> dict[str, torch.Tensor]:
        out, residual_out, *_ = fused_add_rms_norm_forward(x, residual, weight, self.eps, 0.0,
                                                           "gemma")
        return {"out": out, "residual": residual_out}
