"""Unquantised bf16 linear layer without bias: y = x @ weight^T.

Mirrors vLLM's ``UnquantizedLinearMethod.apply`` (vllm.model_executor.layers.linear), which calls
``torch.nn.functional.linear`` (a cuBLASLt bf16 GEMM with fp32 accumulation), and so does the
reference: the semantics are bf16 products summed in fp32, rounded once to bf16. (An explicit
fp32 product would be independent of the library's split-K choices, but as the "PyTorch
reference" baseline and in the project's profiler trace it would cost a GEMM 10x slower than
what serving runs; the tolerance covers the summation-order differences.)
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        # x: [M, K] bf16, weight: [N, K] bf16 (nn.Linear layout) -> [M, N] bf16
        return torch.nn.functional.linear(x, weight)
