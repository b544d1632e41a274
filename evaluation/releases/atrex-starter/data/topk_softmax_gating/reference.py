"""MoE router: softmax over the experts in fp32, top-k, optional renormalisation.

Mirrors vLLM's ``fused_topk`` (vllm.model_executor.layers.fused_moe.fused_moe), which runs the
``topk_softmax`` CUDA op. Outputs: topk_weights fp32 [T, k] in descending order of probability,
topk_ids int32 [T, k] (the experts of those weights). The op's third output
(token_expert_indices) is internal bookkeeping and not part of this benchmark.
"""

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
