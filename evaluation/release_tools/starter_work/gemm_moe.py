"""Semantic work (W) and traffic (Q) of the GEMM and MoE operators of the atrex-starter release.

Operators: linear_bf16, fp8_block_scaled_gemm, fused_moe_bf16, topk_softmax_gating,
moe_align_block_size. Conventions follow evaluation/release_tools/make_fixture_roofline.py: Q counts the
bytes an ideal kernel must move (inputs it needs read once, outputs written once, intermediates kept
on chip); W counts FLOPs under the dtype key of the precision path that does them.

linear_bf16 (x [M, K] bf16, weight [N, K] bf16 -> out [M, N] bf16)
    W = {"bf16": 2*M*N*K}
    Q_read = (M*K + N*K) * 2,  Q_write = M*N * 2

fp8_block_scaled_gemm (a [M, K] fp8, a_scale [M, KB] fp32, b [N, K] fp8, b_scale [NB, KB] fp32,
    KB = ceil(K / block_k), NB = ceil(N / block_n) -> out [M, N] bf16)
    W = {"fp8_e4m3": 2*M*N*K,
         "fp32": 2*M*N*KB}   one multiply by the combined scale a_scale*b_scale and one add into the
                             fp32 accumulator per output element and k-block (the per-row/per-tile
                             scale products themselves are negligible and not counted)
    Q_read = M*K + N*K (fp8, 1 B) + (M*KB + NB*KB) * 4,  Q_write = M*N * 2

fused_moe_bf16 (hidden_states [T, H] bf16, w1 [E, 2I, H] bf16, w2 [E, H, I] bf16,
    topk_weights [T, k] fp32, topk_ids [T, k] int32 -> out [T, H] bf16)
    W = {"bf16": 2*T*k*(2I*H + H*I)    = the gate_up and down products of every (token, slot) pair,
         "fp32": 5*T*k*I + 2*T*k*H}     silu_and_mul at 5 / activation element (fixture convention)
                                        plus the routing weight multiply and the k-way sum, 2 / element
    Q_read = T*H*2 + E_hit * 3*I*H*2 + T*k*(4 + 4),  Q_write = T*H*2
    E_hit = round(E * (1 - (1 - k/E)^T)): the expected number of distinct experts hit when each of
    the T tokens picks k distinct experts uniformly at random (per token, an expert is missed with
    probability 1 - k/E). Deterministic from the shape; only the hit experts' weights are read.

topk_softmax_gating (gating_output [T, E] fp32 -> topk_weights [T, k] fp32, topk_ids [T, k] int32)
    W = {"fp32": 5*T*E + (2*T*k if renormalize else 0)}   softmax 5 / element; renormalising sums
                                                         and divides the k selected weights
    Q_read = T*E*4,  Q_write = T*k*(4 + 4)              (the fixture's formula)

moe_align_block_size (topk_ids [T, k] int32 -> sorted_token_ids [P] int32, expert_ids
    [ceil(P / B)] int32, num_tokens_post_pad [1] int32; N = T*k, B = block_size,
    P = N + E*(B-1), or min(N*B, N + E*(B-1)) when N < E, as the reference allocates)
    An integer op: no floating-point work. Its ALU work is counted nominally under "fp32" (the
    CUDA-core path) so that W is never empty: one histogram increment and one position computation
    per routed pair, plus the E-long prefix sum:  W = {"fp32": 2*N + E}  (negligible next to Q).
    Q_read = N*4,  Q_write = (P + ceil(P / B) + 1) * 4   (the whole padded outputs, sentinel fill
    included, are part of the result).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

# topk_softmax_gating is in the fixture release too: its work model (`fixture_work`), not a copy.
from evaluation.release_tools import make_fixture_roofline as fixture_work
from evaluation.release_tools.make_fixture_roofline import BF16, FP32, INT32, Kwargs, Work

FP8 = 1
INT64 = 8


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def linear_bf16(init: Kwargs, inputs: Kwargs) -> Work:
    m, n, k = inputs["m"], inputs["n"], inputs["k"]
    return Work({"bf16": 2 * m * n * k}, read_bytes=(m * k + n * k) * BF16,
                write_bytes=m * n * BF16)


def fp8_block_scaled_gemm(init: Kwargs, inputs: Kwargs) -> Work:
    m, n, k = inputs["m"], inputs["n"], inputs["k"]
    kb = _ceil_div(k, init["block_k"])
    nb = _ceil_div(n, init["block_n"])
    read = (m * k + n * k) * FP8 + (m * kb + nb * kb) * FP32
    return Work({"fp8_e4m3": 2 * m * n * k, "fp32": 2 * m * n * kb}, read_bytes=read,
                write_bytes=m * n * BF16)


def expected_experts_hit(num_tokens: int, num_experts: int, topk: int) -> int:
    """Expected distinct experts hit by T tokens that each pick k distinct experts uniformly."""
    expected = num_experts * (1.0 - (1.0 - topk / num_experts) ** num_tokens)
    return max(1, min(num_experts, round(expected)))


def fused_moe_bf16(init: Kwargs, inputs: Kwargs) -> Work:
    t, h, i = inputs["num_tokens"], inputs["hidden_size"], inputs["intermediate_size"]
    e, k = inputs["num_experts"], inputs["topk"]
    hit = expected_experts_hit(t, e, k)
    matmul = 2 * t * k * (2 * i * h + h * i)
    elementwise = 5 * t * k * i + 2 * t * k * h
    read = t * h * BF16 + hit * 3 * i * h * BF16 + t * k * (FP32 + INT32)
    return Work({"bf16": matmul, "fp32": elementwise}, read_bytes=read, write_bytes=t * h * BF16)


def moe_align_padded_len(num_pairs: int, num_experts: int, block_size: int) -> int:
    padded = num_pairs + num_experts * (block_size - 1)
    if num_pairs < num_experts:
        padded = min(num_pairs * block_size, padded)
    return padded


def moe_align_block_size(init: Kwargs, inputs: Kwargs) -> Work:
    n = inputs["num_tokens"] * inputs["topk"]
    e, bs = init["num_experts"], init["block_size"]
    p = moe_align_padded_len(n, e, bs)
    return Work({"fp32": 2 * n + e}, read_bytes=n * INT32,
                write_bytes=(p + _ceil_div(p, bs) + 1) * INT32)


WORK_MODELS: Mapping[str, Callable[[Kwargs, Kwargs], Work]] = {
    "linear_bf16": linear_bf16,
    "fp8_block_scaled_gemm": fp8_block_scaled_gemm,
    "fused_moe_bf16": fused_moe_bf16,
    "topk_softmax_gating": fixture_work.topk_softmax_gating,
    "moe_align_block_size": moe_align_block_size,
}
