import torch


def _make_inputs(num_tokens: int, num_experts: int) -> dict[str, torch.Tensor]:
    """Standard-normal router logits whose order within a row is never ambiguous.

    Each row is a random permutation of normal quantiles, each jittered inside the middle
    half of its stratum: the values look like N(0, 1) draws, but neighbours differ by at
    least about half a stratum, so every correct kernel picks the same expert ids (they are
    compared exactly) whatever its exp or reduction order.
    """
    ranks = torch.argsort(torch.rand(num_tokens, num_experts), dim=-1).to(torch.float32)
    jitter = 0.25 + 0.5 * torch.rand(num_tokens, num_experts)
    return {"gating_output": torch.special.ndtri((ranks + jitter) / num_experts)}
