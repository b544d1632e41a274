"""MoE top-k softmax gating in Triton: one program per token, experts in registers.

Top-k is k unrolled rounds of "take the max, remember it, mask it out"; k is small (2-8).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _topk_softmax_kernel(
    logits_ptr, weights_ptr, ids_ptr, num_experts, logits_row_stride,
    TOPK: tl.constexpr, RENORMALIZE: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    offs_e = tl.arange(0, BLOCK_E)
    logits = tl.load(logits_ptr + row * logits_row_stride + offs_e, mask=offs_e < num_experts,
                     other=float("-inf")).to(tl.float32)
    row_max = tl.max(logits, axis=0)
    denom = tl.sum(tl.exp(logits - row_max), axis=0)

    offs_k = tl.arange(0, BLOCK_K)
    weights = tl.zeros((BLOCK_K,), dtype=tl.float32)
    ids = tl.zeros((BLOCK_K,), dtype=tl.int32)
    # Select on logits, not probabilities: softmax is monotonic, and logits cannot tie
    # through exp underflow.
    remaining = logits
    for i in tl.static_range(TOPK):
        best = tl.max(remaining, axis=0)
        # Lowest index among equal maxima, like torch.topk on ties.
        best_id = tl.min(tl.where(remaining == best, offs_e, BLOCK_E), axis=0)
        weights = tl.where(offs_k == i, tl.exp(best - row_max) / denom, weights)
        ids = tl.where(offs_k == i, best_id, ids)
        remaining = tl.where(offs_e == best_id, float("-inf"), remaining)
    if RENORMALIZE:
        weights = weights / tl.sum(weights, axis=0)
    out_mask = offs_k < TOPK
    tl.store(weights_ptr + row * TOPK + offs_k, weights, mask=out_mask)
    tl.store(ids_ptr + row * TOPK + offs_k, ids, mask=out_mask)


class Model(torch.nn.Module):
    def __init__(self, topk: int, renormalize: bool) -> None:
        super().__init__()
        self.topk = topk
        self.renormalize = renormalize

    def forward(self, gating_output: torch.Tensor) -> dict[str, torch.Tensor]:
        num_tokens, num_experts = gating_output.shape
        weights = torch.empty((num_tokens, self.topk), dtype=torch.float32,
                              device=gating_output.device)
        ids = torch.empty((num_tokens, self.topk), dtype=torch.int32, device=gating_output.device)
        block_e = triton.next_power_of_2(num_experts)
        _topk_softmax_kernel[(num_tokens,)](
            gating_output, weights, ids, num_experts, gating_output.stride(0),
            TOPK=self.topk, RENORMALIZE=self.renormalize, BLOCK_E=block_e,
            BLOCK_K=triton.next_power_of_2(self.topk), num_warps=1 if block_e <= 256 else 4,
        )
        return {"topk_weights": weights, "topk_ids": ids}
