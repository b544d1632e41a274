"""MoE router: softmax over experts, then top-k, as vLLM's fused_topk (topk_softmax op)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, topk: int, renormalize: bool) -> None:
        super().__init__()
        self.topk = topk
        self.renormalize = renormalize

    def forward(self, gating_output: torch.Tensor) -> dict[str, torch.Tensor]:
        probs = torch.softmax(gating_output.to(torch.float32), dim=-1)
        weights, ids = torch.topk(probs, self.topk, dim=-1, largest=True, sorted=True)
        if self.renormalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return {"topk_weights": weights, "topk_ids": ids.to(torch.int32)}
