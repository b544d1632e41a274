"""MoE top-k softmax gating in plain PyTorch (a fallback: no DSL kernel at all)."""

import torch


class Model(torch.nn.Module):
    def __init__(self, topk: int, renormalize: bool) -> None:
        super().__init__()
        self.topk = topk
        self.renormalize = renormalize

    def forward(self, gating_output: torch.Tensor) -> dict[str, torch.Tensor]:
        # Top-k of the logits equals top-k of the probabilities; normalise only the k picked.
        logits = gating_output.float()
        top_logits, ids = logits.topk(self.topk, dim=-1)
        log_denom = torch.logsumexp(logits, dim=-1, keepdim=True)
        weights = torch.exp(top_logits - log_denom)
        if self.renormalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return {"topk_weights": weights, "topk_ids": ids.int()}
