import torch


def _make_inputs(num_tokens: int, hidden_size: int, intermediate_size: int, num_experts: int,
                 topk: int, renormalize: bool) -> dict[str, torch.Tensor]:
    """Unit-scale hidden states, trained-looking expert weights and a realistic random router.

    Expert weights have std fan_in^-1/2 (H for w1, I for w2), so activations stay O(1).
    Routing: softmax of standard-normal router logits over the experts, top-k, renormalised
    to sum to 1 when the model's config has norm_topk_prob / renormalize (as vLLM's
    fused_topk does); each token picks k distinct experts. topk_ids are int32 as in vLLM.
    """
    hidden_states = torch.randn(num_tokens, hidden_size, dtype=torch.bfloat16)
    # Drawn directly in bf16 and scaled in place: no fp32 copy of the (multi-GB) expert weights.
    w1 = torch.randn(num_experts, 2 * intermediate_size, hidden_size, dtype=torch.bfloat16)
    w1.mul_(hidden_size**-0.5)
    w2 = torch.randn(num_experts, hidden_size, intermediate_size, dtype=torch.bfloat16)
    w2.mul_(intermediate_size**-0.5)
    probs = torch.softmax(torch.randn(num_tokens, num_experts), dim=-1)
    topk_weights, topk_ids = torch.topk(probs, topk, dim=-1)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return {
        "hidden_states": hidden_states,
        "w1": w1,
        "w2": w2,
        "topk_weights": topk_weights.to(torch.float32),
        "topk_ids": topk_ids.to(torch.int32),
    }
