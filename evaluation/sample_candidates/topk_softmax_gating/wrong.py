"""A plausible but wrong Triton top-k gating: it swaps exp for exp2 without the log2(e) factor,
so the softmax runs at the wrong temperature (the expert ids are still right)."""

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
    denom = tl.sum(tl.exp2(logits - row_max), axis=0)
    offs_k = tl.arange(0, BLOCK_K)
    weights = tl.zeros((BLOCK_K,), dtype=tl.float32)
    ids = tl.zeros((BLOCK_K,), dtype=tl.int32)
    remaining = logits
    for i in tl.static_range(TOPK):
        best = tl.max(remaining, axis=0)
        best_id = tl.min(tl.where(remaining == best, offs_e, BLOCK_E), axis=0)
        weights = tl.where(offs_k == i, tl.exp2(best - row_max) / denom, weights)
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
        _topk_softmax_kernel[(num_tokens,)](
            gating_output, weights, ids, num_experts, gating_output.stride(0),
            TOPK=self.topk, RENORMALIZE=self.renormalize,
            BLOCK_E=triton.next_power_of_2(num_experts),
            BLOCK_K=triton.next_power_of_2(self.topk), num_warps=1,
        )
        return {"topk_weights": weights, "topk_ids": ids}
