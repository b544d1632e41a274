import torch


def _make_inputs(num_tokens: int, num_experts: int) -> dict[str, torch.Tensor]:
    """Router logits that look like N(0, 1) draws but never tie or nearly tie.

    Every row is a random permutation of E normal quantiles, each jittered within the middle
    half of its probability stratum. Neighbouring logits therefore differ by at least about half
    a stratum, so the top-k set and its order are unambiguous for any correct kernel whatever its
    exp approximation or reduction order (the ids are compared exactly).
    """
    ranks = torch.rand(num_tokens, num_experts).argsort(dim=-1).to(torch.float32)
    jitter = 0.25 + 0.5 * torch.rand(num_tokens, num_experts)
    logits = torch.special.ndtri((ranks + jitter) / num_experts)
    return {"gating_output": logits.to(torch.float32)}
