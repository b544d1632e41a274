"""Work models (W, Q) of the attention_cache group of the atrex-starter release.

Conventions are make_fixture_roofline.py's: Q counts the bytes an ideal kernel must move
(inputs read once, outputs written once, intermediates on chip), restricted to what the op
actually touches; W counts FLOPs under the dtype key of the precision path that does them.

reshape_and_cache (T = num_tokens, H = num_kv_heads, D = head_dim)
    W = {} (a copy, no arithmetic)
    Q_read  = 2*T*H*D*BF16 (key, value) + T*INT64 (slot_mapping)
    Q_write = 2*T*H*D*BF16 (T slots of key_cache and of value_cache)
    The untouched cache pool is neither read nor written by an ideal in-place kernel and does
    not count (the reference returns written copies; see metadata.json provenance notes).

paged_decode_attention (B = batch, Hq = num_heads, H = num_kv_heads, D = head_dim,
    bs = block_size, C = context_len; input.py makes sum(seq_lens) = B*C exactly)
    W = {"bf16": 4*Hq*D*B*C (q.K^T and P.V, 2 FLOPs per MAC, every query head over its
         sequence's C tokens), "fp32": 5*Hq*B*C (scale+softmax, 5 per score)}
    Q_read  = 2*B*C*H*D*BF16 (the K and V rows inside the contexts; the rest of the pool and
              the padding of the last block do not count) + B*Hq*D*BF16 (query)
              + B*ceil(C/bs)*INT32 (the block-table entries in use, counted at the mean
              context) + B*INT32 (seq_lens)
    Q_write = B*Hq*D*BF16

varlen_prefill_attention (L_i = input_kwargs.seq_lens, T = sum L_i, fixed per shape)
    W = {"bf16": 2 matmuls x 2 x sum_i(L_i^2/2) x Hq x D = 2*Hq*D*sum_i L_i^2  (causal half),
         "fp32": 5 x Hq x sum_i(L_i^2/2)  (softmax on the causal half, floor division)}
    Q_read  = T*Hq*D*BF16 (q) + 2*T*H*D*BF16 (k, v) + (n+1)*INT32 (cu_seqlens)
    Q_write = T*Hq*D*BF16

topk_topp_filter (B = batch, V = vocab_size)
    W = {"fp32": 6*B*V}: softmax 5 / element (max, subtract, exp, sum, divide) + 1 / element
        for the cumulative sum of probabilities; sorting, selecting and comparing are not FLOPs.
    Q_read  = B*V*FP32 (logits) + B*INT64 (k) + B*FP32 (p)
    Q_write = B*V*FP32 (filtered logits)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from evaluation.release_tools.make_fixture_roofline import BF16, FP16, FP32, INT32, Kwargs, Work  # noqa: F401

FP8 = 1
INT64 = 8


def reshape_and_cache(init: Kwargs, inputs: Kwargs) -> Work:
    t, h, d = inputs["num_tokens"], inputs["num_kv_heads"], inputs["head_dim"]
    rows = 2 * t * h * d * BF16
    return Work({}, read_bytes=rows + t * INT64, write_bytes=rows)


def paged_decode_attention(init: Kwargs, inputs: Kwargs) -> Work:
    b, hq, h, d = inputs["batch"], inputs["num_heads"], inputs["num_kv_heads"], inputs["head_dim"]
    bs, c = inputs["block_size"], inputs["context_len"]
    tokens = b * c  # sum of seq_lens, exact by construction
    read = (2 * tokens * h * d * BF16 + b * hq * d * BF16
            + b * (-(-c // bs)) * INT32 + b * INT32)
    return Work({"bf16": 4 * hq * d * tokens, "fp32": 5 * hq * tokens}, read_bytes=read,
                write_bytes=b * hq * d * BF16)


def varlen_prefill_attention(init: Kwargs, inputs: Kwargs) -> Work:
    lens = list(inputs["seq_lens"])
    hq, h, d = inputs["num_heads"], inputs["num_kv_heads"], inputs["head_dim"]
    t = sum(lens)
    squares = sum(n * n for n in lens)
    read = t * hq * d * BF16 + 2 * t * h * d * BF16 + (len(lens) + 1) * INT32
    return Work({"bf16": 2 * hq * d * squares, "fp32": 5 * hq * squares // 2},
                read_bytes=read, write_bytes=t * hq * d * BF16)


def topk_topp_filter(init: Kwargs, inputs: Kwargs) -> Work:
    b, v = inputs["batch"], inputs["vocab_size"]
    return Work({"fp32": 6 * b * v}, read_bytes=b * v * FP32 + b * (INT64 + FP32),
                write_bytes=b * v * FP32)


WORK_MODELS: Mapping[str, Callable[[Kwargs, Kwargs], Work]] = {
    "reshape_and_cache": reshape_and_cache,
    "paged_decode_attention": paged_decode_attention,
    "varlen_prefill_attention": varlen_prefill_attention,
    "topk_topp_filter": topk_topp_filter,
}
