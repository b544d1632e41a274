"""W8A8 block-scaled fp8 GEMM (DeepSeek-V3 style), bf16 output.

Mirrors vLLM's ``w8a8_block_fp8_matmul`` (vllm.model_executor.layers.quantization.utils.fp8_utils;
SGLang has the same op in sglang.srt.layers.quantization.fp8_kernel):

    out[m, n] = sum over k-blocks kb of
                a_scale[m, kb] * b_scale[n // block_n, kb] * sum_{k in kb} a[m, k] * b[n, k]

a is [M, K] fp8_e4m3 with one fp32 scale per token and group of block_k columns
(a_scale [M, ceil(K / block_k)]); b is [N, K] fp8_e4m3 (nn.Linear layout) with one fp32 scale per
block_n x block_k tile (b_scale [ceil(N / block_n), ceil(K / block_k)]); a partial last block in N
or K uses its block's scale. Accumulation in fp32, one rounding to bf16 at the end.

fp8 tensors cannot be multiplied on a CPU, so the reference dequantises both operands to fp32
and does one fp32 matmul: the same sum, reassociated (only fp32 rounding differs).
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, block_n: int, block_k: int) -> None:
        super().__init__()
        self.block_n = block_n
        self.block_k = block_k

    def forward(self, a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor,
                b_scale: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[0]
        # Broadcast each scale over the elements of its group / tile, cropping a partial last block.
        a_scale_full = a_scale.to(torch.float32).repeat_interleave(self.block_k, dim=1)[:, :k]
        b_scale_full = (b_scale.to(torch.float32)
                        .repeat_interleave(self.block_n, dim=0)[:n]
                        .repeat_interleave(self.block_k, dim=1)[:, :k])
        a_deq = a.to(torch.float32) * a_scale_full
        b_deq = b.to(torch.float32) * b_scale_full
        return torch.matmul(a_deq, b_deq.t()).to(torch.bfloat16)
