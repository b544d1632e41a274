"""Group the (token, slot) pairs of a MoE routing by expert, padded to the GEMM block size.

Mirrors vLLM's ``moe_align_block_size`` (vllm.model_executor.layers.fused_moe.moe_align_block_size,
CUDA op ``moe_align_block_size``; SGLang has the same op) without expert_map and without
pad_sorted_ids. With N = T*k routed pairs (flat index i = t*k + j), E experts and block size B:

- sorted_token_ids int32 [max_padded]: for each expert in ascending order, the flat indices routed
  to it in ascending order, then the sentinel N up to the next multiple of B; after the last
  expert's group the array is filled with N up to its end.
  max_padded = N + E*(B-1), or min(N*B, N + E*(B-1)) when N < E (vLLM's allocation).
- expert_ids int32 [ceil(max_padded / B)]: the expert of each block of sorted_token_ids;
  blocks past num_tokens_post_pad hold -1 (vLLM's marker for an inactive block).
- num_tokens_post_pad int32 [1]: sum over experts of ceil(count_e / B) * B.

Canonical order: the CUDA kernel places the pairs of one expert in an order that depends on
thread scheduling; this benchmark defines it as ascending flat index (a stable sort by expert).
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, num_experts: int, block_size: int) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.block_size = block_size

    def forward(self, topk_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        e, bs = self.num_experts, self.block_size
        device = topk_ids.device
        flat = topk_ids.reshape(-1).to(torch.int64)
        n = flat.numel()
        max_padded = n + e * (bs - 1)
        if n < e:
            max_padded = min(n * bs, max_padded)
        num_blocks = -(-max_padded // bs)

        counts = torch.bincount(flat, minlength=e)
        padded = (counts + bs - 1) // bs * bs
        padded_end = torch.cumsum(padded, dim=0)
        padded_start = padded_end - padded
        count_start = torch.cumsum(counts, dim=0) - counts

        order = torch.argsort(flat, stable=True)  # ascending expert, ascending flat index
        expert_of = flat[order]
        rank = torch.arange(n, device=device) - count_start[expert_of]
        sorted_token_ids = torch.full((max_padded,), n, dtype=torch.int32, device=device)
        sorted_token_ids[padded_start[expert_of] + rank] = order.to(torch.int32)

        # Block b belongs to the first expert whose padded group ends after b*B.
        block_start = torch.arange(num_blocks, device=device) * bs
        block_expert = torch.searchsorted(padded_end, block_start, right=True)
        total = padded_end[-1]
        expert_ids = torch.where(block_start < total, block_expert,
                                 torch.full_like(block_expert, -1)).to(torch.int32)
        return {
            "sorted_token_ids": sorted_token_ids,
            "expert_ids": expert_ids,
            "num_tokens_post_pad": total.reshape(1).to(torch.int32),
        }
