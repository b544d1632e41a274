"""Causal multi-head attention forward (prefill), written out as explicit fp32 math."""

import math

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seq_len, head_dim = q.shape[-2], q.shape[-1]
        scores = torch.matmul(q.to(torch.float32), k.to(torch.float32).transpose(-1, -2))
        scores = scores * (1.0 / math.sqrt(head_dim))
        future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        return torch.matmul(probs, v.to(torch.float32)).to(q.dtype)
