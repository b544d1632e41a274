"""GQA decode attention over a paged KV cache, as vLLM's paged attention
(`vllm._custom_ops.paged_attention_v1` / `paged_attention_v2`) and FlashAttention's
`flash_attn_with_kvcache` decode path used by `vllm.v1.attention.backends.flash_attn`.

Shapes: query [B, num_heads, head_dim]; key_cache / value_cache
[num_blocks, block_size, num_kv_heads, head_dim] (flash layout); block_tables [B, max_blocks]
(int32, entry j of row b is the cache block holding tokens j*block_size .. of sequence b);
seq_lens [B] (int32, context length including the new token). Query head h reads KV head
h // (num_heads // num_kv_heads). Output [B, num_heads, head_dim] in the query dtype:

    out[b, h] = softmax(scale * q[b, h] . K_b[:seq_len_b]^T) V_b[:seq_len_b]

computed in float32 and rounded once at the end. Sequences are processed in a few batch chunks
only to bound the memory of the gathered float32 K/V; each chunk is fully vectorised.
"""

import torch
from torch import nn

# Elements of gathered K (and again of V) per chunk: 2**28 float32 = 1 GiB each.
_CHUNK_ELEMENTS = 1 << 28


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                block_tables: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
        batch, num_heads, head_dim = query.shape
        block_size, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
        group = num_heads // num_kv_heads
        out = torch.empty_like(query)
        longest = int(seq_lens.max())
        per_seq = -(-longest // block_size) * block_size * num_kv_heads * head_dim
        chunk = max(1, _CHUNK_ELEMENTS // per_seq)
        for start in range(0, batch, chunk):
            end = min(batch, start + chunk)
            lens = seq_lens[start:end].to(torch.long)
            blocks = -(-int(lens.max()) // block_size)
            tables = block_tables[start:end, :blocks].to(torch.long)
            n, tokens = end - start, blocks * block_size
            # [n, blocks, block_size, kv_heads, d] -> [n, kv_heads, tokens, d]
            keys = key_cache[tables].reshape(n, tokens, num_kv_heads, head_dim)
            values = value_cache[tables].reshape(n, tokens, num_kv_heads, head_dim)
            keys = keys.permute(0, 2, 1, 3).to(torch.float32)
            values = values.permute(0, 2, 1, 3).to(torch.float32)
            q = query[start:end].to(torch.float32).reshape(n, num_kv_heads, group, head_dim)
            scores = torch.matmul(q, keys.transpose(-1, -2)) * self.scale  # [n, kv, g, tokens]
            past_end = torch.arange(tokens, device=query.device).unsqueeze(0) >= lens.unsqueeze(1)
            scores = scores.masked_fill(past_end[:, None, None, :], float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            result = torch.matmul(probs, values)  # [n, kv, g, d]
            out[start:end] = result.reshape(n, num_heads, head_dim).to(query.dtype)
        return out
