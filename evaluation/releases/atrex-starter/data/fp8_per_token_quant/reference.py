"""Dynamic per-token fp8 (e4m3) quantisation of bf16 activations, as vLLM does it.

Mirrors ``vllm._custom_ops.scaled_fp8_quant(x, use_per_token_if_dynamic=True)`` (CUDA op
``torch.ops._C.dynamic_per_token_scaled_fp8_quant``; layer ``QuantFP8`` with a per-token
group shape in ``vllm.model_executor.layers.quantization.input_quant_fp8``), without the
optional ``scale_ub``. For each row (token):

    scale = max(max_j |x_j| / 448, 1 / (448 * 512))      fp32, one per row
    out_j = fp8_e4m3(clamp(x_j / scale, -448, 448))       round to nearest even

Returns the quantised rows and the [T, 1] fp32 scales (dequantised x ~= out * scale).
"""

import torch
from torch import nn

FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max
MIN_SCALE = 1.0 / (FP8_MAX * 512.0)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        x32 = x.float()
        amax = x32.abs().amax(dim=-1, keepdim=True)
        scales = (amax / FP8_MAX).clamp(min=MIN_SCALE)
        out = (x32 / scales).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        return {"out": out, "scales": scales}
