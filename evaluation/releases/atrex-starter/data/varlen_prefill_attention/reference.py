"""Causal GQA prefill attention over packed variable-length sequences, as vLLM's FlashAttention
backend (`vllm.v1.attention.backends.flash_attn`, `flash_attn_varlen_func` from
`vllm.vllm_flash_attn` with causal=True, cu_seqlens_q == cu_seqlens_k, no KV-cache prefix).

q [total_tokens, num_heads, head_dim]; k, v [total_tokens, num_kv_heads, head_dim];
cu_seqlens int32 [num_seqs + 1], sequence i being rows cu_seqlens[i] .. cu_seqlens[i+1]-1.
Query head h attends with KV head h // (num_heads // num_kv_heads); token j of a sequence
attends to tokens 0..j of the same sequence only:

    out_i = softmax(scale * Q_i K_i^T + causal mask) V_i

Evaluated per sequence (num_seqs is at most 64 in every shape) with PyTorch's
scaled_dot_product_attention on the input dtype (fp32 accumulation in its fused kernels).
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                cu_seqlens: torch.Tensor) -> torch.Tensor:
        group = q.shape[1] // k.shape[1]
        out = torch.empty_like(q)
        bounds = cu_seqlens.tolist()
        for start, end in zip(bounds[:-1], bounds[1:]):
            if end == start:
                continue
            # [tokens, heads, d] -> [1, heads, tokens, d]; KV heads repeated to the query heads.
            qi = q[start:end].transpose(0, 1).unsqueeze(0)
            ki = k[start:end].repeat_interleave(group, dim=1).transpose(0, 1).unsqueeze(0)
            vi = v[start:end].repeat_interleave(group, dim=1).transpose(0, 1).unsqueeze(0)
            oi = F.scaled_dot_product_attention(qi, ki, vi, is_causal=True, scale=self.scale)
            out[start:end] = oi[0].transpose(0, 1)
        return out
