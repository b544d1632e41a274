import torch


def _make_inputs(num_tokens: int, num_seqs: int, num_kv_heads: int, head_dim: int,
                 block_size: int, num_blocks: int) -> dict[str, torch.Tensor]:
    """New K/V rows of `num_seqs` sequences and the slots the scheduler gave them.

    `num_tokens` is split evenly over the sequences. Decode (one token per sequence): each
    sequence's current block is a distinct random block of the pool and the token lands at a
    random row of it (the context length modulo block_size). Prefill (several tokens per
    sequence): each prompt fills ceil(n / block_size) distinct random blocks from row 0. Every
    slot is therefore unique and inside the pool; the rest of the pool holds stale values.
    """
    if num_tokens % num_seqs:
        raise ValueError("num_tokens must be a multiple of num_seqs")
    per_seq = num_tokens // num_seqs
    if per_seq == 1:
        start = torch.randint(0, block_size, (num_seqs, 1))
        blocks_per_seq = 1
    else:
        start = torch.zeros(num_seqs, 1, dtype=torch.long)
        blocks_per_seq = -(-per_seq // block_size)
    if num_seqs * blocks_per_seq > num_blocks:
        raise ValueError("the pool has too few blocks for these sequences")
    blocks = torch.randperm(num_blocks)[: num_seqs * blocks_per_seq].view(num_seqs, blocks_per_seq)
    position = start + torch.arange(per_seq).unsqueeze(0)  # row within the sequence's blocks
    slot_mapping = blocks.gather(1, position // block_size) * block_size + position % block_size
    cache_shape = (num_blocks, block_size, num_kv_heads, head_dim)
    return {
        "key": torch.randn(num_tokens, num_kv_heads, head_dim, dtype=torch.bfloat16),
        "value": torch.randn(num_tokens, num_kv_heads, head_dim, dtype=torch.bfloat16),
        "key_cache": torch.randn(cache_shape, dtype=torch.bfloat16),
        "value_cache": torch.randn(cache_shape, dtype=torch.bfloat16),
        "slot_mapping": slot_mapping.reshape(-1).to(torch.int64),
    }
