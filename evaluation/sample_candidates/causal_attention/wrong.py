"""A plausible but wrong Triton causal attention: the diagonal block skips its causal mask,
so each query also attends to later keys of its own block.

Otherwise the same as triton_native.py: causal attention forward, FlashAttention-2 style.

Each program owns BLOCK_M query rows of one (batch, head) and streams K/V blocks with an
online softmax. Key blocks entirely in the past need no mask; blocks entirely in the future
are never visited, which halves the work.
"""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _attend_block(
    acc, m_i, l_i, q, k_base, v_base, start_n, offs_m, offs_n, offs_d, seq_len, head_dim,
    stride_ks, stride_kd, stride_vs, stride_vd, qk_scale,
    CAUSAL_MASK: tl.constexpr, EVEN_D: tl.constexpr,
):
    keys = start_n + offs_n
    k_ptrs = k_base + keys[None, :] * stride_ks + offs_d[:, None] * stride_kd
    v_ptrs = v_base + keys[:, None] * stride_vs + offs_d[None, :] * stride_vd
    # Blocks before the diagonal lie wholly inside the sequence: only the diagonal block can
    # cross the sequence end, and only a padded head dimension needs a D mask.
    if CAUSAL_MASK or not EVEN_D:
        k = tl.load(k_ptrs, mask=(keys[None, :] < seq_len) & (offs_d[:, None] < head_dim),
                    other=0.0)
        v = tl.load(v_ptrs, mask=(keys[:, None] < seq_len) & (offs_d[None, :] < head_dim),
                    other=0.0)
    else:
        k = tl.load(k_ptrs)
        v = tl.load(v_ptrs)
    qk = tl.dot(q, k) * qk_scale  # log2 domain: exp2 below is exp of the scaled scores
    if CAUSAL_MASK:
        qk = tl.where(offs_m[:, None] >= keys[None, :], qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, axis=1))
    p = tl.exp2(qk - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, m_new, l_i


@triton.jit
def _causal_attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr,
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    num_heads, seq_len, head_dim, qk_scale,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, EVEN_D: tl.constexpr,
):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // num_heads).to(tl.int64)
    h = (bh % num_heads).to(tl.int64)
    q_base = q_ptr + b * stride_qb + h * stride_qh
    k_base = k_ptr + b * stride_kb + h * stride_kh
    v_base = v_ptr + b * stride_vb + h * stride_vh
    o_base = o_ptr + b * stride_ob + h * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    row_mask = (offs_m[:, None] < seq_len) & (offs_d[None, :] < head_dim)
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd,
                mask=row_mask, other=0.0)

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    diag_start = start_m * BLOCK_M
    # Keys before this query block are visible to every row in it (BLOCK_M % BLOCK_N == 0).
    for start_n in range(0, diag_start, BLOCK_N):
        acc, m_i, l_i = _attend_block(
            acc, m_i, l_i, q, k_base, v_base, start_n, offs_m, offs_n, offs_d, seq_len,
            head_dim, stride_ks, stride_kd, stride_vs, stride_vd, qk_scale,
            CAUSAL_MASK=False, EVEN_D=EVEN_D)
    # The diagonal block: each row sees keys up to itself.
    diag_end = tl.minimum(diag_start + BLOCK_M, seq_len)
    for start_n in range(diag_start, diag_end, BLOCK_N):
        acc, m_i, l_i = _attend_block(
            acc, m_i, l_i, q, k_base, v_base, start_n, offs_m, offs_n, offs_d, seq_len,
            head_dim, stride_ks, stride_kd, stride_vs, stride_vd, qk_scale,
            CAUSAL_MASK=False, EVEN_D=False)

    out = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od,
             out.to(o_ptr.dtype.element_ty), mask=row_mask)


def _blocks(seq_len: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages); small blocks for short (test) sequences."""
    if seq_len >= 512:
        return 128, 64, 8, 3
    if seq_len >= 128:
        return 64, 64, 4, 3
    return 16, 16, 4, 2


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        batch, num_heads, seq_len, head_dim = q.shape
        out = torch.empty_like(q)
        block_m, block_n, num_warps, num_stages = _blocks(seq_len)
        block_d = max(16, triton.next_power_of_2(head_dim))
        qk_scale = (1.0 / math.sqrt(head_dim)) * 1.4426950408889634  # log2(e)
        grid = (triton.cdiv(seq_len, block_m), batch * num_heads)
        _causal_attention_kernel[grid](
            q, k, v, out,
            *q.stride(), *k.stride(), *v.stride(), *out.stride(),
            num_heads, seq_len, head_dim, qk_scale,
            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, EVEN_D=block_d == head_dim,
            num_warps=num_warps, num_stages=num_stages,
        )
        return out
