import torch


def _make_inputs(m: int, n: int, k: int) -> dict[str, torch.Tensor]:
    """Activations of unit scale and a weight scaled like a trained projection (std K^-1/2),
    so every output element is O(1) whatever K is."""
    x = torch.randn(m, k, dtype=torch.bfloat16)
    weight = (torch.randn(n, k) * k**-0.5).to(torch.bfloat16)
    return {"x": x, "weight": weight}
