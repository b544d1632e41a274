import torch


def _make_inputs(m: int, n: int, k: int) -> dict[str, torch.Tensor]:
    a = torch.randn(m, k, dtype=torch.float16)
    # Weights scaled like a trained projection so outputs stay O(1) for every K.
    b = (torch.randn(k, n) * k**-0.5).to(torch.float16)
    return {"a": a, "b": b}
