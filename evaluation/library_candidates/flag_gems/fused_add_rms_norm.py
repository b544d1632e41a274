"""fused_add_rms_norm through FlagGems. Its kernel writes both results over its inputs, and
a candidate must leave its inputs as they were: the adapter hands it copies (two copies the
library's own callers would not pay)."""

import torch
from flag_gems.fused.fused_add_rms_norm import fused_add_rms_norm


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-06) -> None:
        super().__init__()
        self.eps = float(eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor,
                weight: torch.Tensor) -> dict[str, torch.Tensor]:
        out, residual_out = fused_add_rms_norm(x.clone(), residual.clone(), [x.shape[-1]],
                                               weight, eps=self.eps)
        return {"out": out, "residual": residual_out}
