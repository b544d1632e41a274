"""bf16 fused mixture-of-experts layer with a SiLU-gated MLP per expert.

Mirrors vLLM's ``fused_experts`` (vllm.model_executor.layers.fused_moe.fused_moe, used by
``FusedMoE`` with activation "silu" and no quantisation):

    out[t] = sum_j topk_weights[t, j] * down_e( silu(x_t @ W1g_e^T) * (x_t @ W1u_e^T) ),
             e = topk_ids[t, j],   down_e(h) = h @ W2_e^T

w1 is [E, 2*I, H] with the gate rows first and the up rows second; w2 is [E, H, I].
The reference computes everything in fp32 from the bf16 operands and rounds once to bf16
(vLLM's kernels round the intermediate activations to bf16; that difference is within the
operator's tolerance). It loops over the experts that received tokens (at most E <= 256);
finding them needs one host synchronisation.
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, hidden_states: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
        num_tokens, hidden = hidden_states.shape
        num_experts, two_i, _ = w1.shape
        inter = two_i // 2
        topk = topk_ids.shape[1]

        flat_ids = topk_ids.reshape(-1).to(torch.int64)  # [T*k], row t*k + j
        order = torch.argsort(flat_ids, stable=True)  # (token, slot) pairs grouped by expert
        counts = torch.bincount(flat_ids, minlength=num_experts).tolist()
        x_sorted = hidden_states.index_select(0, order // topk).to(torch.float32)

        y_sorted = torch.empty(num_tokens * topk, hidden, dtype=torch.float32,
                               device=hidden_states.device)
        start = 0
        for expert, count in enumerate(counts):
            if count == 0:
                continue
            rows = slice(start, start + count)
            gate_up = torch.matmul(x_sorted[rows], w1[expert].to(torch.float32).t())
            act = torch.nn.functional.silu(gate_up[:, :inter]) * gate_up[:, inter:]
            y_sorted[rows] = torch.matmul(act, w2[expert].to(torch.float32).t())
            start += count

        # Undo the sort (a permutation, so no accumulation races), then weight and sum the k slots.
        y = torch.empty_like(y_sorted)
        y[order] = y_sorted
        y = y.view(num_tokens, topk, hidden) * topk_weights.to(torch.float32)[:, :, None]
        return y.sum(dim=1).to(hidden_states.dtype)
