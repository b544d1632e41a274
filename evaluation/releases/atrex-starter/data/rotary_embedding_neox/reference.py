"""Neox-style rotary position embedding of query and key, as vLLM's ``RotaryEmbedding``.

Mirrors ``vllm.model_executor.layers.rotary_embedding.RotaryEmbedding`` with
``is_neox_style=True`` (``forward_native``; CUDA op ``torch.ops._C.rotary_embedding``, kernel
``vllm::rotary_embedding_kernel``). ``cos_sin_cache`` [max_position, rotary_dim] fp32 holds
cos(p * f_i) in its first rotary_dim/2 columns and sin(p * f_i) in the rest. For every
token and head, the first ``rotary_dim`` features of the head split into halves x1, x2
(neox pairing: feature i with feature i + rotary_dim/2) and become
``x1*cos - x2*sin`` and ``x2*cos + x1*sin``; features past ``rotary_dim`` pass through.
The math is done in fp32 and rounded to bf16 once. vLLM's op works in place on query and
key; this model returns the rotated tensors as new ones.
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, head_size: int, rotary_dim: int) -> None:
        super().__init__()
        self.head_size = head_size
        self.rotary_dim = rotary_dim

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        num_tokens = x.shape[0]
        heads = x.reshape(num_tokens, -1, self.head_size)
        half = self.rotary_dim // 2
        x1 = heads[..., :half].float()
        x2 = heads[..., half:self.rotary_dim].float()
        rotated = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)
        out = torch.cat((rotated, heads[..., self.rotary_dim:]), dim=-1)
        return out.reshape(x.shape)

    def forward(
        self,
        positions: torch.Tensor,
        query: torch.Tensor,
        key: torch.Tensor,
        cos_sin_cache: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        cos_sin = cos_sin_cache.index_select(0, positions).float()  # [T, rotary_dim]
        half = self.rotary_dim // 2
        cos = cos_sin[:, None, :half]  # broadcast over heads
        sin = cos_sin[:, None, half:]
        return {"query": self._rotate(query, cos, sin), "key": self._rotate(key, cos, sin)}
