import torch


def _make_inputs(num_tokens: int, hidden_size: int) -> dict[str, torch.Tensor]:
    x = torch.randn(num_tokens, hidden_size, dtype=torch.bfloat16)
    # Trained RMSNorm weights sit around 1 but are far from constant.
    weight = (torch.rand(hidden_size) + 0.5).to(torch.bfloat16)
    return {"x": x, "weight": weight}
