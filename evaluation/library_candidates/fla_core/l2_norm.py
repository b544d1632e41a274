"""l2_norm through fla-core (flash-linear-attention's kernels): its L2-norm forward,
1 / sqrt(sum(x^2) + eps) per row, as the reference."""

import torch
from fla.modules.norm.l2norm import l2norm_fwd


class Model(torch.nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-06) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _rstd = l2norm_fwd(x, self.eps)
        return out
