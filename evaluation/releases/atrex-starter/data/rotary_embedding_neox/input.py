import torch


def _make_inputs(
    num_tokens: int,
    num_seqs: int,
    num_heads: int,
    num_kv_heads: int,
    head_size: int,
    rotary_dim: int,
    max_position: int,
    rope_theta: float,
) -> dict[str, torch.Tensor]:
    """Query/key rows of a batch of `num_seqs` sequences, `num_tokens // num_seqs` tokens each.

    Decode shapes have one token per sequence; prefill shapes a chunk of consecutive
    positions per sequence. The cache [0, max_position) is cut into `num_seqs` equal slots,
    each sequence gets its own slot (in random order) and its chunk starts at a random offset
    inside it, so every position is valid and no two tokens of the batch share a position.
    """
    assert num_tokens % num_seqs == 0, "num_tokens must split evenly over the sequences"
    seq_len = num_tokens // num_seqs
    slot = max_position // num_seqs
    assert seq_len <= slot, "the sequences do not fit in the rotary cache"
    slot_start = torch.randperm(num_seqs) * slot
    offset = torch.randint(0, slot - seq_len + 1, (num_seqs,))
    starts = slot_start + offset
    positions = (starts[:, None] + torch.arange(seq_len)[None, :]).reshape(-1).to(torch.int64)

    # Plain rope_theta frequencies, as RotaryEmbedding._compute_cos_sin_cache builds them.
    inv_freq = 1.0 / (rope_theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64)
                                     / rotary_dim))
    angles = torch.arange(max_position, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos_sin_cache = torch.cat((angles.cos(), angles.sin()), dim=-1).to(torch.float32)

    # Projected queries and keys, of unit scale.
    query = torch.randn(num_tokens, num_heads * head_size).to(torch.bfloat16)
    key = torch.randn(num_tokens, num_kv_heads * head_size).to(torch.bfloat16)
    return {"positions": positions, "query": query, "key": key, "cos_sin_cache": cos_sin_cache}
