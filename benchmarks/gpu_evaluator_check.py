"""Evaluate the fixture operators at real sizes on a GPU and print what the harness saw.

Run on the H200 (see benchmarks/README.md). It checks, and prints as tables:
- each sample candidate gets the verdict it should (Triton native, torch fallback-torch,
  SDPA / cuBLAS fallback-vendor, torch.compile fallback-compiled);
- the same evaluation run twice gives per-shape medians within 2%;
- evaluator seconds per shape (5 correctness trials, adoption, timing; child start included).

Usage: python benchmarks/gpu_evaluator_check.py [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from _path import REPO

from evaluation.harness.evaluate import EvaluationRequest, EvaluationSettings, apply_roofline, evaluate
from evaluation.harness.isolation.child_process import WarmChildren
from evaluation.harness.isolation.sandbox import SandboxSettings
from evaluation.harness.release import load_release
from evaluation.harness.results import EvaluationResult

RELEASE = REPO / "evaluation" / "releases" / "atrex-fixture"
CANDIDATES = REPO / "evaluation" / "sample_candidates"

# (operator, candidate file, expected verdict)
CASES = [
    ("rms_norm", "triton_native", "native"),
    ("rms_norm", "torch_fallback", "fallback-torch"),
    ("rms_norm", "torch_compiled", "fallback-compiled"),
    ("causal_attention", "sdpa_vendor", "fallback-vendor"),
    ("gemm_fp16", "torch_matmul", "fallback-vendor"),
    ("fused_add_rms_norm", "triton_native", "native"),
    ("silu_and_mul", "triton_native", "native"),
    ("gemm_fp16", "triton_native", "native"),
    ("topk_softmax_gating", "triton_native", "native"),
    ("causal_attention", "triton_native", "native"),
]
REPEATED = [("rms_norm", "triton_native"), ("gemm_fp16", "triton_native"),
            ("silu_and_mul", "triton_native")]


def run_case(operator: str, candidate: str, quick: bool,
             warm: WarmChildren | None = None) -> EvaluationResult:
    release = load_release(RELEASE)
    op = release.operator(operator)
    shape_ids = [s.id for s in op.public.shapes if not s.id.startswith("dev-")]
    if quick:
        shape_ids = shape_ids[:2]
    job = EvaluationRequest(
        operator=op.public,
        candidate_source=(CANDIDATES / operator / f"{candidate}.py").read_text(),
        tolerance=op.tolerance, shape_ids=shape_ids,
        dsl_ratio_threshold=release.settings.dsl_ratio_threshold,
        masked_paths=(release.root,),
    )
    result = evaluate(job, EvaluationSettings(), warm=warm)
    assert op.roofline is not None
    return apply_roofline(result, op.roofline, release.hardware["H200"])


def us(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e6:9.2f}"


def print_result(label: str, expected: str, result: EvaluationResult) -> list[bool]:
    print(f"\n## {label}  (expected verdict: {expected}; {result.seconds:.1f} s for "
          f"{len(result.shapes)} shapes; isolation uid={result.isolation.get('uid')} "
          f"netns={result.isolation.get('network_namespace')})")
    print(f"{'shape':34} {'status':8} {'verdict':18} {'ratio':>5} {'median us':>9} "
          f"{'p10':>9} {'p90':>9} {'n':>4} {'method':6} {'event us':>9} {'SOL us':>9} "
          f"{'attain':>6} {'sec':>5}")
    ok = []
    for shape in result.shapes:
        timing = shape.timing or {}
        roof = shape.roofline or {}
        adoption = shape.adoption or {}
        verdict = shape.verdict or "-"
        ok.append(verdict == expected)
        attain = roof.get("attainment")
        print(f"{shape.shape_id:34} {shape.status:8} {verdict:18} "
              f"{adoption.get('dsl_ratio', 0):5.2f} {us(timing.get('median_s'))} "
              f"{us(timing.get('p10_s'))} {us(timing.get('p90_s'))} {timing.get('n', 0):4} "
              f"{timing.get('method') or '-':6} {us(timing.get('event_median_s'))} "
              f"{us(roof.get('sol_s'))} {'-' if attain is None else f'{attain:6.3f}'} "
              f"{shape.seconds:5.2f}")
        if shape.error:
            print(f"   error: {shape.error[:300]}")
        foreign = adoption.get("foreign_kernels") or []
        if foreign and verdict != "native":
            names = ", ".join(str(k["name"])[:60] for k in foreign[:3])
            print(f"   foreign kernels: {names}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="two real shapes per case")
    parser.add_argument("--out", type=Path, default=None, help="write result JSONs here")
    args = parser.parse_args()
    summary = []
    per_shape_seconds: list[float] = []
    # Children are started ahead of need, as a worker does; the warm one launches no
    # kernel, so it must not disturb the timing of the evaluation running beside it.
    warm = WarmChildren(device="cuda", dsl="triton", masked_paths=(RELEASE.resolve(),),
                        settings=SandboxSettings())
    for operator, candidate, expected in CASES:
        started = time.perf_counter()
        result = run_case(operator, candidate, args.quick, warm)
        ok = print_result(f"{operator} / {candidate}", expected, result)
        per_shape_seconds += [s.seconds for s in result.shapes]
        summary.append((f"{operator}/{candidate}", expected, sum(ok), len(ok),
                        time.perf_counter() - started, len(result.shapes)))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{operator}__{candidate}.json").write_text(result.to_json())

    print("\n## Repeatability: the same evaluation twice, per-shape median difference")
    spreads = []
    for operator, candidate in REPEATED:
        first, second = (run_case(operator, candidate, args.quick, warm) for _ in range(2))
        for a, b in zip(first.shapes, second.shapes, strict=True):
            ma, mb = (a.timing or {}).get("median_s"), (b.timing or {}).get("median_s")
            if ma and mb:
                diff = abs(ma - mb) / min(ma, mb)
                spreads.append(diff)
                print(f"{operator:20} {a.shape_id:34} {ma * 1e6:9.2f} {mb * 1e6:9.2f} us "
                      f"diff {diff * 100:5.2f}%")

    warm.close()
    print("\n## Summary")
    for label, expected, good, total, seconds, shapes in summary:
        print(f"{label:40} expected {expected:18} {good}/{total} shapes  "
              f"{seconds:6.1f} s total, {seconds / max(shapes, 1):5.2f} s/shape")
    if per_shape_seconds:
        print(f"evaluator seconds per shape (stages only): median "
              f"{statistics.median(per_shape_seconds):.2f}, mean "
              f"{statistics.fmean(per_shape_seconds):.2f}, max {max(per_shape_seconds):.2f}")
    if spreads:
        print(f"repeat median spread: max {max(spreads) * 100:.2f}%, "
              f"median {statistics.median(spreads) * 100:.2f}% over {len(spreads)} shapes")
    if args.out:
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
