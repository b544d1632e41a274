"""Top-k then top-p (nucleus) filtering of sampler logits, as vLLM's `apply_top_k_top_p`
(`vllm.v1.sample.ops.topk_topp_sampler`), with per-row k and p tensors.

For each row b (written here with a descending sort; vLLM sorts ascending, which selects the
same set in exact arithmetic):
  1. top-k: keep the logits >= the k[b]-th largest logit of the row (k[b] >= vocab keeps all).
  2. top-p: softmax over the logits kept by step 1 (the rest count as -inf, probability 0);
     walking down the sorted row, keep a token iff the probability mass of the tokens ranked
     above it is < p[b]: the smallest prefix whose mass reaches p[b]. The top token is always
     kept; p[b] >= 1 disables top-p.
  3. every logit not kept becomes -inf; kept logits are returned unchanged.
Ties (probability ~0 for the generated inputs): step 1 keeps every logit equal to the k-th
largest; in step 2 the sort is stable, so among equal logits the lower vocabulary index ranks
first (and is kept first).
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        logits = logits.to(torch.float32)
        vocab = logits.shape[-1]
        ranked, order = torch.sort(logits, dim=-1, descending=True, stable=True)
        kth = ranked.gather(-1, (k.to(torch.long).clamp(1, vocab) - 1).unsqueeze(-1))
        ranked = ranked.masked_fill(ranked < kth, float("-inf"))
        probs = torch.softmax(ranked, dim=-1)
        mass_above = torch.cumsum(probs, dim=-1) - probs  # exclusive prefix sum
        mass_above[:, 0] = 0.0
        p = p.to(torch.float32).unsqueeze(-1)
        drop = (mass_above >= p) & (p < 1.0)
        drop[:, 0] = False
        ranked = ranked.masked_fill(drop, float("-inf"))
        return torch.empty_like(logits).scatter_(-1, order, ranked)
