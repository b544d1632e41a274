import torch


def _make_inputs(num_tokens: int, d: int) -> dict[str, torch.Tensor]:
    # The gate_up projection's output: gate in x[:, :d], up in x[:, d:].
    x = 1.5 * torch.randn(num_tokens, 2 * d)
    return {"x": x.to(torch.bfloat16)}
