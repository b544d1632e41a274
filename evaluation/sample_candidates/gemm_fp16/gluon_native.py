"""fp16 GEMM in Gluon on CUDA cores: each program a BLOCK_M x BLOCK_N tile of the output,
accumulated in fp32 one k at a time as an outer product of a column of A and a row of B
(explicit layouts: the tile's blocked layout and its two slices). Honest and slow: no
tensor cores (Gluon's MMA paths need shared-memory layouts this sample leaves out)."""

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

BLOCK_M, BLOCK_N, WARPS = 32, 64, 4


@gluon.jit
def _gemm_gluon(a_ptr, b_ptr, out_ptr, m, n, k, stride_am, stride_ak, stride_bk, stride_bn,
                stride_om, stride_on, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                WARPS: gl.constexpr):
    tile: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [WARPS, 1], [1, 0])
    rows_layout: gl.constexpr = gl.SliceLayout(1, tile)
    cols_layout: gl.constexpr = gl.SliceLayout(0, tile)
    rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=rows_layout)
    cols = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=cols_layout)
    row_ok = rows < m
    col_ok = cols < n
    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=tile)
    for kk in range(0, k):
        a = gl.load(a_ptr + rows.to(gl.int64) * stride_am + kk * stride_ak, mask=row_ok,
                    other=0.0).to(gl.float32)
        b = gl.load(b_ptr + kk * stride_bk + cols.to(gl.int64) * stride_bn, mask=col_ok,
                    other=0.0).to(gl.float32)
        acc += gl.expand_dims(a, 1) * gl.expand_dims(b, 0)
    offsets = gl.expand_dims(rows.to(gl.int64) * stride_om, 1) + \
        gl.expand_dims(cols.to(gl.int64) * stride_on, 0)
    mask = gl.expand_dims(row_ok, 1) & gl.expand_dims(col_ok, 0)
    gl.store(out_ptr + offsets, acc.to(out_ptr.dtype.element_ty), mask=mask)


class Model(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[1]
        out = torch.empty((m, n), dtype=a.dtype, device=a.device)
        grid = ((m + BLOCK_M - 1) // BLOCK_M, (n + BLOCK_N - 1) // BLOCK_N)
        _gemm_gluon[grid](a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                          out.stride(0), out.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                          WARPS=WARPS, num_warps=WARPS)
        return out
