import torch


def _make_inputs(num_tokens: int, hidden_size: int) -> dict[str, torch.Tensor]:
    # x: the attention or MLP output of a layer; residual: the running residual stream,
    # which is larger than one layer's contribution.
    x = torch.randn(num_tokens, hidden_size).to(torch.bfloat16)
    residual = (4.0 * torch.randn(num_tokens, hidden_size)).to(torch.bfloat16)
    weight = (torch.rand(hidden_size) + 0.5).to(torch.bfloat16)
    return {"x": x, "residual": residual, "weight": weight}
