"""Work models (W, Q) of the norms_quant group of the atrex-starter release.

Operators: rms_norm, fused_add_rms_norm, silu_and_mul, rotary_embedding_neox,
fp8_per_token_quant, per_token_group_fp8_quant. Every one is elementwise or a row reduction:
memory-bound, W matters only for completeness. Conventions follow
evaluation/release_tools/make_fixture_roofline.py: Q counts the bytes an ideal kernel must touch
(each input read once, each output written once, intermediates kept on chip); W counts FLOPs
under the dtype key of the precision path that does them, here always "fp32" (bf16/fp8
storage, fp32 math). Per-row and per-group scalar work (one rsqrt per row, one amax/448
divide per row or per 128-element group) is negligible and not counted, as in the fixture.

T = num_tokens (rows), H = hidden_size (row width), d = intermediate size.
Byte sizes: bf16 2, fp32 4, fp8 1, int64 8.

rms_norm                  W fp32 = 4*T*H   (square, accumulate, scale by 1/rms, scale by weight)
                          Q_read = (T*H + H)*2 (x, weight)      Q_write = T*H*2
fused_add_rms_norm        W fp32 = 5*T*H   (the residual add, then the 4 of rms_norm)
                          Q_read = (2*T*H + H)*2 (x, residual, weight)
                          Q_write = 2*T*H*2 (out, new residual)
silu_and_mul              W fp32 = 5*T*d   (negate, exp, add, divide, multiply by up)
                          Q_read = T*2d*2                       Q_write = T*d*2
rotary_embedding_neox     rotated features R = T*(num_heads + num_kv_heads)*rotary_dim;
                          each (x1, x2) pair becomes x1*cos - x2*sin, x2*cos + x1*sin:
                          6 FLOPs per pair = 3 per rotated feature -> W fp32 = 3*R
                          Q_read = T*(num_heads + num_kv_heads)*head_size*2 (query, key)
                                 + T*8 (positions)
                                 + T*rotary_dim*4 (one cos/sin cache row per token: input.py
                                   gives every token of a batch its own position, so exactly T
                                   distinct rows are touched, not the whole cache)
                          Q_write = T*(num_heads + num_kv_heads)*head_size*2 (query, key;
                                 pass-through features past rotary_dim are written too, since
                                 the outputs are new tensors)
fp8_per_token_quant       W fp32 = 2*T*H   (|x| max-reduction, scale x by 1/scale; the
                          saturating clamp is part of the fp8 conversion, not counted)
                          Q_read = T*H*2                        Q_write = T*H*1 + T*4 (scales)
per_token_group_fp8_quant W fp32 = 2*T*H   (as above, per 128-element group)
                          Q_read = T*H*2                        Q_write = T*H*1 + T*(H/g)*4
                          (g = group_size, one fp32 scale per group)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

# The operators the fixture release has too keep its work models (`fixture_work`), not copies.
from evaluation.release_tools import make_fixture_roofline as fixture_work
from evaluation.release_tools.make_fixture_roofline import BF16, FP32, Kwargs, Work

FP8 = 1
INT64 = 8


def rotary_embedding_neox(init: Kwargs, inputs: Kwargs) -> Work:
    t = inputs["num_tokens"]
    heads = inputs["num_heads"] + inputs["num_kv_heads"]
    head_size, rot = inputs["head_size"], inputs["rotary_dim"]
    qk_bytes = t * heads * head_size * BF16
    return Work({"fp32": 3 * t * heads * rot},
                read_bytes=qk_bytes + t * INT64 + t * rot * FP32,
                write_bytes=qk_bytes)


def fp8_per_token_quant(init: Kwargs, inputs: Kwargs) -> Work:
    t, h = inputs["num_tokens"], inputs["hidden_size"]
    return Work({"fp32": 2 * t * h}, read_bytes=t * h * BF16,
                write_bytes=t * h * FP8 + t * FP32)


def per_token_group_fp8_quant(init: Kwargs, inputs: Kwargs) -> Work:
    t, h = inputs["num_tokens"], inputs["hidden_size"]
    group = (init or {}).get("group_size", 128)
    return Work({"fp32": 2 * t * h}, read_bytes=t * h * BF16,
                write_bytes=t * h * FP8 + t * (h // group) * FP32)


WORK_MODELS: Mapping[str, Callable[[Kwargs, Kwargs], Work]] = {
    "rms_norm": fixture_work.rms_norm,
    "fused_add_rms_norm": fixture_work.fused_add_rms_norm,
    "silu_and_mul": fixture_work.silu_and_mul,
    "rotary_embedding_neox": rotary_embedding_neox,
    "fp8_per_token_quant": fp8_per_token_quant,
    "per_token_group_fp8_quant": per_token_group_fp8_quant,
}
