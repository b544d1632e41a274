"""Run the adversarial submissions on a GPU and write their outcomes to docs/integrity-gpu.md.

Every file in tests/adversarial/candidates/ is evaluated like a submission for the fixture's
rms_norm on two real-size shapes, beside the honest Triton candidate. A case counts as
caught when every shape failed with a reason, or scored 0 as a fallback, or was quarantined
as suspicious (attainment > 1), or at least did not score above the honest candidate; the
worker (this process and its warm children) must survive every case.

The GPU-only cases (those tests/adversarial/test_cpu_cases.py leaves to a GPU) run first,
the CPU cases after them; a row is written as soon as its case ends, and no case starts
after --deadline-s, so a run cut short still leaves its rows. The honest candidate's medians
are printed beside the ones measured before the timing stage was hardened.

Usage: python benchmarks/adversarial_gpu.py [--cases a,b] [--out docs/integrity-gpu.md]
       [--timing-s 0.3] [--deadline-s 600]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from _path import REPO

from evaluation.harness.evaluate import (
    EvaluationRequest,
    EvaluationSettings,
    apply_roofline,
    evaluate,
)
from evaluation.harness.isolation.child_process import WarmChildren
from evaluation.harness.isolation.sandbox import SandboxSettings
from evaluation.harness.release import load_release
from evaluation.harness.timing import TimingSettings

RELEASE = REPO / "evaluation" / "releases" / "atrex-fixture"
CASES = REPO / "tests" / "adversarial" / "candidates"
HONEST = REPO / "evaluation" / "sample_candidates" / "rms_norm" / "triton_native.py"
SHAPES = ["llama8b-decode-t32-h4096", "llama8b-prefill-t4096-h4096"]
# The honest candidate's medians on these shapes before the timing stage refilled and
# checked its calls (benchmarks/results/h200-2026-11-29/check.log, the same H200 kind).
BEFORE_HARDENING_US = {"llama8b-decode-t32-h4096": 1.95, "llama8b-prefill-t4096-h4096": 17.18}
# What tests/adversarial/test_cpu_cases.py leaves to a GPU; run first.
GPU_FIRST = ["restore_before_the_end", "persistent_dispatch_mode_eager",
             "persistent_dispatch_mode", "library_override", "guard_disabled",
             "cache_fingerprint", "cache_id_version", "batch_and_skip", "forge_marker",
             "side_stream", "persisting_l2", "cache_data_ptr", "call_count_skip", "gpu_oom",
             "huge_host_alloc"]


class Runner:
    def __init__(self, timing_s: float, device: str) -> None:
        self.release = load_release(RELEASE)
        self.op = self.release.operator("rms_norm")
        self.settings = EvaluationSettings(compile_timeout_s=60, call_timeout_s=60,
                                           timing=TimingSettings(max_seconds=timing_s),
                                           device=device)
        self.warm = WarmChildren(device=device, dsl="triton", masked_paths=(self.release.root,),
                                 settings=SandboxSettings())

    def run(self, source: str) -> list[dict[str, Any]]:
        op = self.op
        job = EvaluationRequest(operator=op.public, candidate_source=source, tolerance=op.tolerance,
                            shape_ids=SHAPES, masked_paths=(self.release.root,),
                            dsl_ratio_threshold=self.release.settings.dsl_ratio_threshold)
        result = evaluate(job, self.settings, warm=self.warm)
        assert op.roofline is not None
        apply_roofline(result, op.roofline, self.release.hardware["H200"])
        rows = []
        for shape in result.shapes:
            roof = shape.roofline or {}
            timing = shape.timing or {}
            rows.append({"shape": shape.shape_id, "status": shape.status,
                         "verdict": shape.verdict, "attainment": roof.get("attainment"),
                         "suspicious": bool(roof.get("suspicious")),
                         "median_us": (timing.get("median_s") or 0) * 1e6 or None,
                         "method": timing.get("method"), "n": timing.get("n"),
                         "fresh": timing.get("fresh_inputs"),
                         "checked": timing.get("checked_calls"),
                         "error": (shape.error or "")[:600]})
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
    parser.add_argument("--timing-s", type=float, default=0.3)
    parser.add_argument("--deadline-s", type=float, default=600.0)
    args = parser.parse_args()
    import torch

    begun = time.perf_counter()
    every = sorted(p.stem for p in CASES.glob("*.py"))
    names = [n for n in args.cases.split(",") if n] or (
        [n for n in GPU_FIRST if n in every] + [n for n in every if n not in GPU_FIRST])
    if torch.cuda.is_available():
        device, gpu = "cuda", torch.cuda.get_device_name()
    else:  # a dry run of this script's plumbing in Triton's interpreter, on the dev shapes
        device, gpu = "cpu", "no GPU (dry run)"
        SHAPES[:] = ["dev-t4-h256", "dev-t3-h200"]
    runner = Runner(args.timing_s, device)
    honest = runner.run(HONEST.read_text())
    honest_score = statistics.median(scored(r) for r in honest)
    lines = [
        "# Adversarial submissions on a GPU",
        "",
        f"Written by `benchmarks/adversarial_gpu.py` on {gpu} "
        f"(torch {torch.__version__}), {time.strftime('%Y-%m-%d')}: each case evaluated as "
        f"rms_norm on {', '.join(SHAPES)} ({args.timing_s} s of timing per shape). A case is "
        "caught when its median score is not above the honest candidate's (failed, fallback "
        "and suspicious shapes score 0).",
        "",
        "Honest Triton candidate (`evaluation/sample_candidates/rms_norm/triton_native.py`), "
        f"median score {honest_score:.3f}:",
        "",
        "| shape | status | method | median µs | before hardening µs | attainment | fresh "
        "inputs | checked calls |",
        "| --- | --- | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for r in honest:
        lines.append(f"| {r['shape']} | {r['status']} {r['verdict']} | {r['method']} | "
                     f"{(r['median_us'] or 0):.2f} | {BEFORE_HARDENING_US.get(r['shape'], 0):.2f} | "
                     f"{(r['attainment'] or 0):.3f} | {r['fresh']} | {r['checked']} |")
    lines += ["", "| case | outcome per shape | score | caught |", "| --- | --- | ---: | --- |"]
    print("\n".join(lines), flush=True)
    args.out.write_text("\n".join(lines) + "\n")
    for name in names:
        if time.perf_counter() - begun > args.deadline_s:
            lines.append(f"| {name} | not run: the run's deadline passed | – | – |")
            continue
        started = time.perf_counter()
        try:
            rows = runner.run((CASES / f"{name}.py").read_text())
        except Exception as exc:  # noqa: BLE001 - a harness failure is the finding here
            lines.append(f"| {name} | harness error: {type(exc).__name__}: {exc} | – | NO: "
                         "the harness failed |")
            print(lines[-1], flush=True)
            args.out.write_text("\n".join(lines) + "\n")
            continue
        score = statistics.median(scored(r) for r in rows)
        outcome = "; ".join(
            f"{r['status']}" + (f" {r['verdict']}" if r["verdict"] else "")
            + (" suspicious" if r["suspicious"] else "")
            + (f" a={r['attainment']:.3f}" if r["attainment"] is not None else "")
            + (f" {r['median_us']:.2f} µs" if r["median_us"] else "")
            + (f" ({r['error']})" if r["error"] else "") for r in rows)
        caught = score <= honest_score * 1.05
        lines.append(f"| {name} | {outcome.replace('|', '/')} | {score:.3f} | "
                     f"{'yes' if caught else 'NO'} ({time.perf_counter() - started:.0f} s) |")
        print(lines[-1], flush=True)
        args.out.write_text("\n".join(lines) + "\n")
    runner.warm.close()
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
