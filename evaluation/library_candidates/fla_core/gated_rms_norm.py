"""gated_rms_norm through fla-core: its gated RMSNorm (the Mamba-2 form; SiLU gate, before
or after the norm as the shape says)."""

import torch
from fla.modules.norm.layernorm_gated import rmsnorm_fn


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-06, norm_before_gate: bool = True,
                 activation: str = "silu") -> None:
        super().__init__()
        if activation not in ("silu", "swish"):
            raise ValueError(f"fla-core's gated RMSNorm gates with SiLU only, not {activation}")
        self.eps = float(eps)
        self.norm_before_gate = bool(norm_before_gate)

    def forward(self, x: torch.Tensor, weight: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return rmsnorm_fn(x, weight, None, z, self.eps, None, self.norm_before_gate)
