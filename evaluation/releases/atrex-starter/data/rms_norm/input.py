import torch


def _make_inputs(num_tokens: int, hidden_size: int) -> dict[str, torch.Tensor]:
    # Rows of hidden states whose scale varies from token to token.
    row_scale = torch.exp(0.5 * torch.randn(num_tokens, 1))
    x = (torch.randn(num_tokens, hidden_size) * row_scale).to(torch.bfloat16)
    # Trained RMSNorm weights sit around 1 but are far from constant.
    weight = (torch.rand(hidden_size) + 0.5).to(torch.bfloat16)
    return {"x": x, "weight": weight}
