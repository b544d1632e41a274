import torch


def _make_inputs(seq_lens: list[int], num_heads: int, num_kv_heads: int,
                 head_dim: int) -> dict[str, torch.Tensor]:
    """Random q/k/v for prompts of exactly the lengths in `seq_lens`, packed back to back."""
    total = sum(seq_lens)
    cu_seqlens = torch.zeros(len(seq_lens) + 1, dtype=torch.int32)
    cu_seqlens[1:] = torch.cumsum(torch.tensor(seq_lens, dtype=torch.int64), 0).to(torch.int32)
    return {
        "q": torch.randn(total, num_heads, head_dim, dtype=torch.bfloat16),
        "k": torch.randn(total, num_kv_heads, head_dim, dtype=torch.bfloat16),
        "v": torch.randn(total, num_kv_heads, head_dim, dtype=torch.bfloat16),
        "cu_seqlens": cu_seqlens,
    }
