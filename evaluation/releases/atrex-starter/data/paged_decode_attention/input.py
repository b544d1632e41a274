import math

import torch


def _seq_lens(batch: int, context_len: int) -> torch.Tensor:
    """Context lengths spread uniformly over about [0.5, 1.5] x context_len, summing exactly to
    batch * context_len (so the KV traffic of a shape is fixed); batch 1 gets context_len."""
    spread = torch.rand(batch, dtype=torch.float64)
    spread = spread - spread.mean()
    spread = spread * (0.5 / spread.abs().max().clamp_min(0.5))  # within [-0.5, 0.5]
    exact = context_len * (1.0 + spread)
    lens = exact.floor().to(torch.long).clamp_min(1)
    short = batch * context_len - int(lens.sum())
    if short > 0:
        lens[torch.randperm(batch)[:short]] += 1
    return lens


def _make_inputs(batch: int, num_heads: int, num_kv_heads: int, head_dim: int, block_size: int,
                 context_len: int) -> dict[str, torch.Tensor]:
    """One decode step of `batch` sequences whose contexts average `context_len` tokens.

    The pool has room for every sequence at the longest possible length (1.5 x context_len)
    plus an eighth; block 0 is the null block (vLLM reserves it) and pads the block tables
    past each sequence's last block. Each sequence's blocks are distinct random pool blocks.
    """
    max_blocks = math.ceil(1.5 * context_len / block_size) + 1
    num_blocks = 1 + batch * max_blocks + (batch * max_blocks) // 8
    seq_lens = _seq_lens(batch, context_len)
    used = (seq_lens + block_size - 1) // block_size  # blocks each sequence occupies
    block_tables = torch.zeros(batch, max_blocks, dtype=torch.long)
    in_use = torch.arange(max_blocks).unsqueeze(0) < used.unsqueeze(1)
    block_tables[in_use] = torch.randperm(num_blocks - 1)[: int(used.sum())] + 1
    cache_shape = (num_blocks, block_size, num_kv_heads, head_dim)
    return {
        "query": torch.randn(batch, num_heads, head_dim, dtype=torch.bfloat16),
        "key_cache": torch.randn(cache_shape, dtype=torch.bfloat16),
        "value_cache": torch.randn(cache_shape, dtype=torch.bfloat16),
        "block_tables": block_tables.to(torch.int32),
        "seq_lens": seq_lens.to(torch.int32),
    }
