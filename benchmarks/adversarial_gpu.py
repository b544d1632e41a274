"""Run the adversarial submissions on a GPU and write their outcomes to docs/integrity-gpu.md.

Every file in tests/adversarial/candidates/ is evaluated like a submission for the fixture's
rms_norm on two real-size shapes, beside the honest Triton candidate. A case counts as
caught when every shape failed with a reason, or scored 0 as a fallback, or was quarantined
as suspicious (attainment > 1), or at least did not score above the honest candidate; the
worker (this process and its warm children) must survive every case.

Usage: python benchmarks/adversarial_gpu.py [--cases a,b] [--out docs/integrity-gpu.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluation.harness.evaluate import (  # noqa: E402
    EvaluationJob,
    EvaluationSettings,
    apply_roofline,
    evaluate,
)
from evaluation.harness.release import load_release  # noqa: E402

RELEASE = REPO / "evaluation" / "releases" / "atrex-fixture"
CASES = REPO / "tests" / "adversarial" / "candidates"
HONEST = REPO / "evaluation" / "sample_candidates" / "rms_norm" / "triton_native.py"
SHAPES = ["llama8b-decode-t32-h4096", "llama8b-prefill-t4096-h4096"]


def run(source: str) -> list[dict[str, Any]]:
    release = load_release(RELEASE)
    op = release.operator("rms_norm")
    job = EvaluationJob(operator=op.public, candidate_source=source, tolerance=op.tolerance,
                        shape_ids=SHAPES, masked_paths=(release.root,),
                        dsl_ratio_threshold=release.settings.dsl_ratio_threshold)
    result = evaluate(job, EvaluationSettings(compile_timeout_s=60, call_timeout_s=60))
    assert op.roofline is not None
    apply_roofline(result, op.roofline, release.hardware["H200"])
    rows = []
    for shape in result.shapes:
        roof = shape.roofline or {}
        rows.append({"shape": shape.shape_id, "status": shape.status,
                     "verdict": shape.verdict, "attainment": roof.get("attainment"),
                     "suspicious": bool(roof.get("suspicious")),
                     "error": (shape.error or "")[:160]})
    return rows


def scored(row: dict[str, Any]) -> float:
    """What the shape would score on a board (fallback policy: 0)."""
    if row["status"] != "passed" or row["verdict"] != "native" or row["suspicious"]:
        return 0.0
    return float(row["attainment"] or 0.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "integrity-gpu.md")
    args = parser.parse_args()
    import torch

    names = [n for n in args.cases.split(",") if n] or sorted(p.stem for p in CASES.glob("*.py"))
    honest = run(HONEST.read_text())
    honest_score = statistics.median(scored(r) for r in honest)
    lines = [
        "# Adversarial submissions on a GPU",
        "",
        f"Written by `benchmarks/adversarial_gpu.py` on {torch.cuda.get_device_name()} "
        f"(torch {torch.__version__}), {time.strftime('%Y-%m-%d')}: each case evaluated as "
        f"rms_norm on {', '.join(SHAPES)}. Honest Triton candidate: median score "
        f"{honest_score:.3f}.",
        "",
        "| case | outcome per shape | score | caught |",
        "| --- | --- | ---: | --- |",
    ]
    for name in names:
        started = time.perf_counter()
        try:
            rows = run((CASES / f"{name}.py").read_text())
        except Exception as exc:  # noqa: BLE001 - a harness failure is the finding here
            lines.append(f"| {name} | harness error: {type(exc).__name__}: {exc} | – | NO: "
                         "the harness failed |")
            print(lines[-1], flush=True)
            continue
        score = statistics.median(scored(r) for r in rows)
        outcome = "; ".join(
            f"{r['status']}" + (f" {r['verdict']}" if r["verdict"] else "")
            + (" suspicious" if r["suspicious"] else "")
            + (f" a={r['attainment']:.3f}" if r["attainment"] is not None else "")
            + (f" ({r['error']})" if r["error"] else "") for r in rows)
        caught = score <= honest_score * 1.05
        lines.append(f"| {name} | {outcome.replace('|', '/')} | {score:.3f} | "
                     f"{'yes' if caught else 'NO'} ({time.perf_counter() - started:.0f} s) |")
        print(lines[-1], flush=True)
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
