import torch


def _make_inputs(batch: int, num_heads: int, seq_len: int, head_dim: int) -> dict[str, torch.Tensor]:
    # Llama-style GQA already expanded to one K/V head per query head.
    shape = (batch, num_heads, seq_len, head_dim)
    return {
        "q": torch.randn(shape, dtype=torch.float16),
        "k": torch.randn(shape, dtype=torch.float16),
        "v": torch.randn(shape, dtype=torch.float16),
    }
