import torch


def _make_inputs(num_tokens: int, topk: int, num_experts: int) -> dict[str, torch.Tensor]:
    """Router decisions as a MoE layer produces them: each token's top-k of noisy logits.

    Logits = per-token N(0, 1) noise plus a per-call expert popularity offset N(0, 0.5^2), so the
    load over experts is uneven as in real traffic; each token gets k distinct experts.
    int32, as vLLM's fused_topk returns them.
    """
    popularity = 0.5 * torch.randn(num_experts)
    logits = torch.randn(num_tokens, num_experts) + popularity
    topk_ids = torch.topk(logits, topk, dim=-1).indices
    return {"topk_ids": topk_ids.to(torch.int32)}
