"""Per-token-group fp8 (e4m3) quantisation of bf16 activations (DeepSeek-V3 style).

Mirrors ``per_token_group_quant_fp8`` in vLLM
(``vllm.model_executor.layers.quantization.utils.fp8_utils``; CUDA op
``torch.ops._C.per_token_group_fp8_quant``) and SGLang
(``sglang.srt.layers.quantization.fp8_kernel.per_token_group_quant_fp8``), used for the
activations of block-quantised fp8 checkpoints (``activation_scheme: dynamic``,
``weight_block_size: [128, 128]``). Each row splits into groups of ``group_size`` (128)
consecutive elements; for each group:

    scale = max(max_j |x_j|, 1e-10) / 448                 fp32, one per group
    out_j = fp8_e4m3(clamp(x_j / scale, -448, 448))       round to nearest even

Returns the quantised tensor [T, H] and the row-major fp32 scales [T, H / group_size]
(without the ue8m0 power-of-two rounding and without the column-major scale layout).
"""

import torch
from torch import nn

FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max


class Model(nn.Module):
    def __init__(self, group_size: int = 128, eps: float = 1e-10) -> None:
        super().__init__()
        self.group_size = group_size
        self.eps = eps

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        num_tokens, hidden = x.shape
        groups = x.float().reshape(num_tokens, hidden // self.group_size, self.group_size)
        amax = groups.abs().amax(dim=-1, keepdim=True).clamp(min=self.eps)
        scales = amax / FP8_MAX
        out = (groups / scales).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        return {"out": out.reshape(num_tokens, hidden), "scales": scales.squeeze(-1)}
