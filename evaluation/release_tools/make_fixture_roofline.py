"""Write roofline.json for every operator of the atrex-fixture release.

Usage: python evaluation/release_tools/make_fixture_roofline.py [RELEASE_DIR]

Deterministic and re-runnable: the files depend only on each operator's shapes.json and the
release's configs/hardware/*.yaml.

Counting conventions (semantic, i.e. what the operator must do, not what a kernel does):

Q (bytes)
    Q_read  = every input tensor read once  (elements x element size).
    Q_write = every output tensor written once.
    Intermediates (scores, probabilities, partial sums) never count: an ideal kernel keeps
    them on chip.

W (FLOPs), keyed by the precision path that does them
    - Matrix products: 2*M*N*K under the inputs' dtype key ("fp16" for fp16 operands).
      Causal attention counts only the causal half of both products:
      2 matmuls x 2*B*H*S*S*D / 2 = 2*B*H*S*S*D.
    - Elementwise and reduction math runs in fp32 whatever the storage dtype, under "fp32":
        rms_norm            4 / element  (square, accumulate, scale by rstd, scale by weight)
        fused_add_rms_norm  5 / element  (the residual add, then the 4 of rms_norm)
        silu_and_mul        5 / output element (negate, exp, add, divide, multiply by up)
        softmax             5 / element  (max, subtract, exp, sum, divide); causal attention
                            counts it on the causal half of the score matrix (B*H*S*S/2)
        top-k selection     comparisons are not FLOPs; renormalising adds 2 / selected weight
                            (sum, divide)
      Per-row scalars (one rsqrt per token) are negligible and not counted.

SOL_time_ms[SKU] = max(max_u sum_{d on u} W_d / P_peak[path(d)], (Q_read + Q_write) / B_hbm) * 1e3,
with dtype -> path: bf16->bf16_tc, fp16->fp16_tc, fp8_e4m3->fp8_e4m3_tc,
fp8_e5m2->fp8_e5m2_tc, fp32_tf32->fp32_tf32_tc, fp32->fp32_strict, and u the unit that runs
the path (every *_tc path on the tensor cores, fp32_strict on the CUDA cores). The files say
so with `"compute_overlap": "max"`: the units work concurrently (attention's softmax on the
CUDA cores and SFUs under its matmuls on the tensor cores, a block-scaled GEMM's fp32 rescaling
under its fp8 MMAs), so only the longest unit bounds a kernel, and SOL stays a lower bound.
Atrex-Bench's own files omit the key and add every path's time ("sum").
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evaluation.harness.release import (  # noqa: E402
    COMPUTE_OVERLAP_MAX,
    HIDDEN_SHAPES_FILE,
    HardwareSpec,
    ShapeRoofline,
    load_hardware_dir,
)
from evaluation.harness.roofline import sol_seconds  # noqa: E402

BF16 = FP16 = 2
FP32 = INT32 = 4
DEFAULT_RELEASE = Path(__file__).resolve().parents[1] / "releases" / "atrex-fixture"


@dataclass(frozen=True)
class Work:
    flops: dict[str, int]  # W dtype key -> FLOPs
    read_bytes: int
    write_bytes: int


Kwargs = Mapping[str, Any]


def rms_norm(init: Kwargs, inputs: Kwargs) -> Work:
    t, h = inputs["num_tokens"], inputs["hidden_size"]
    return Work({"fp32": 4 * t * h}, read_bytes=(t * h + h) * BF16, write_bytes=t * h * BF16)


def fused_add_rms_norm(init: Kwargs, inputs: Kwargs) -> Work:
    t, h = inputs["num_tokens"], inputs["hidden_size"]
    # x, residual and weight in; the normalised output and the new residual out.
    return Work({"fp32": 5 * t * h}, read_bytes=(2 * t * h + h) * BF16,
                write_bytes=2 * t * h * BF16)


def silu_and_mul(init: Kwargs, inputs: Kwargs) -> Work:
    t, d = inputs["num_tokens"], inputs["d"]
    return Work({"fp32": 5 * t * d}, read_bytes=t * 2 * d * BF16, write_bytes=t * d * BF16)


def gemm_fp16(init: Kwargs, inputs: Kwargs) -> Work:
    m, n, k = inputs["m"], inputs["n"], inputs["k"]
    return Work({"fp16": 2 * m * n * k}, read_bytes=(m * k + k * n) * FP16,
                write_bytes=m * n * FP16)


def topk_softmax_gating(init: Kwargs, inputs: Kwargs) -> Work:
    t, e = inputs["num_tokens"], inputs["num_experts"]
    topk = init["topk"]
    renorm_flops = 2 * t * topk if init["renormalize"] else 0
    return Work({"fp32": 5 * t * e + renorm_flops}, read_bytes=t * e * FP32,
                write_bytes=t * topk * (FP32 + INT32))


def causal_attention(init: Kwargs, inputs: Kwargs) -> Work:
    b, h, s, d = inputs["batch"], inputs["num_heads"], inputs["seq_len"], inputs["head_dim"]
    matmul_flops = 2 * b * h * s * s * d  # QK^T and PV, causal half of each
    softmax_flops = 5 * b * h * s * s // 2
    tensor_bytes = b * h * s * d * FP16
    return Work({"fp16": matmul_flops, "fp32": softmax_flops}, read_bytes=3 * tensor_bytes,
                write_bytes=tensor_bytes)


WORK_MODELS: Mapping[str, Callable[[Kwargs, Kwargs], Work]] = {
    "rms_norm": rms_norm,
    "fused_add_rms_norm": fused_add_rms_norm,
    "silu_and_mul": silu_and_mul,
    "gemm_fp16": gemm_fp16,
    "topk_softmax_gating": topk_softmax_gating,
    "causal_attention": causal_attention,
}


# The project's releases declare that units overlap (module docstring).
COMPUTE_OVERLAP = COMPUTE_OVERLAP_MAX


def sol_ms(work: Work, hardware: HardwareSpec,
           compute_overlap: str = COMPUTE_OVERLAP) -> float:
    """The harness's own roofline arithmetic, so the file and the evaluator agree."""
    shape = ShapeRoofline(w_flops=work.flops, q_read_bytes=work.read_bytes,
                          q_write_bytes=work.write_bytes, compute_overlap=compute_overlap)
    return sol_seconds(shape, hardware) * 1e3


def operator_roofline(shapes: Mapping[str, Any], model: Callable[[Kwargs, Kwargs], Work],
                      peaks: Mapping[str, HardwareSpec]) -> dict[str, Any]:
    result = {}
    for shape_id, spec in shapes.items():
        work = model(spec.get("init_kwargs") or {}, spec["input_kwargs"])
        result[shape_id] = {
            "semantic_W_flops": dict(sorted(work.flops.items())),
            "semantic_Q_read_bytes": work.read_bytes,
            "semantic_Q_write_bytes": work.write_bytes,
            "SOL_time_ms": {sku: sol_ms(work, peaks[sku]) for sku in sorted(peaks)},
        }
    return {"compute_overlap": COMPUTE_OVERLAP, "shapes": result}


def write_release_rooflines(release: Path,
                            work_models: Mapping[str, Callable[[Kwargs, Kwargs], Work]]
                            = WORK_MODELS) -> list[Path]:
    peaks = load_hardware_dir(release / "configs" / "hardware")
    if not peaks:
        raise SystemExit(f"no hardware profiles in {release / 'configs' / 'hardware'}")
    written = []
    for op_dir in sorted(p for p in (release / "data").iterdir() if p.is_dir()):
        model = work_models.get(op_dir.name)
        if model is None:
            raise SystemExit(f"no work model for operator {op_dir.name!r}")
        shapes = json.loads((op_dir / "shapes.json").read_text())
        hidden = op_dir / HIDDEN_SHAPES_FILE
        if hidden.exists():  # the hidden tier needs its W and Q as much as the public one
            shapes.update(json.loads(hidden.read_text()))
        out = op_dir / "roofline.json"
        out.write_text(json.dumps(operator_roofline(shapes, model, peaks), indent=2) + "\n")
        written.append(out)
    return written


def main(argv: list[str]) -> None:
    release = Path(argv[1]) if len(argv) > 1 else DEFAULT_RELEASE
    for path in write_release_rooflines(release):
        print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv)
