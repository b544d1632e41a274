"""A scripted generator for `atrex loop` (benchmarks/loop_gpu.py): a Triton RMSNorm swept from
a deliberately slow configuration (the row in chunks of 16 elements, one warp, read twice)
toward a fast one (the whole row in registers, read once), one configuration per round.

It follows the loop's contract (atrex_cli/loop.py, docs/agents.md): it reads the round's
input JSON on stdin, writes the candidate to $ATREX_LOOP_OUTPUT and its (zero) token use to
$ATREX_LOOP_USAGE. On a fresh context (after a dropout) it carries on with the next
configuration, as it keeps no conversation; `--rounds-per-config` repeats each one.

The math is the public Atrex-Bench rms_norm's: fp32 throughout, one rounding to the input's
dtype at the end (the fixture release's rounds before the weight multiply; both are within
either's tolerance).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# (mode, chunk, warps): "chunk" loops over the row `chunk` elements at a time and reads it
# twice; "row" holds the whole row (the next power of two) in registers.
SWEEP = [("chunk", 16, 1), ("chunk", 64, 1), ("chunk", 256, 2), ("chunk", 1024, 4),
         ("row", 0, 4), ("row", 0, 8), ("row", 0, 16)]

TEMPLATE = '''"""RMSNorm in Triton, swept by atrex loop: {label}."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_chunks(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps,
                     CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in range(0, n_cols, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=0.0)
        acc += x.to(tl.float32) * x.to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * out_stride + cols,
                 (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_norm_row(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps,
                  BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * out_stride + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = float(eps)

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        if {row_mode}:
            _rms_norm_row[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols,
                                     self.eps, BLOCK=triton.next_power_of_2(n_cols),
                                     num_warps={warps})
        else:
            _rms_norm_chunks[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols,
                                        self.eps, CHUNK={chunk}, num_warps={warps})
        return out
'''


def candidate(index: int) -> str:
    mode, chunk, warps = SWEEP[min(index, len(SWEEP) - 1)]
    label = (f"whole row, {warps} warps" if mode == "row"
             else f"chunks of {chunk}, {warps} warp(s), the row read twice")
    return TEMPLATE.format(label=label, row_mode=mode == "row", chunk=max(chunk, 16),
                           warps=warps)


def main() -> int:
    given = json.loads(sys.stdin.read() or "{}")
    per_config = int(os.environ.get("SWEEP_ROUNDS_PER_CONFIG", "1"))
    index = (int(given.get("round", 1)) - 1) // max(per_config, 1)
    Path(os.environ["ATREX_LOOP_OUTPUT"]).write_text(candidate(index))
    Path(os.environ["ATREX_LOOP_USAGE"]).write_text(json.dumps(
        {"input_tokens": 0, "output_tokens": 0, "model": "scripted-sweep"}))
    best = given.get("best") or {}
    print(f"round {given.get('round')}: config {SWEEP[min(index, len(SWEEP) - 1)]}; best so "
          f"far: round {best.get('round')}, S_op {best.get('s_op')}; fresh context "
          f"{given.get('fresh_context')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
