"""Where an evaluation's seconds per shape go, for a release's own references (its baseline).

The portal spent 7-23 s a shape on some operators of the public Atrex-Bench against calls of
0.05-1.4 s. Two causes showed on the H200 (this script, and the child restarts the baseline
run stored; docs/evaluator.md): outputs of several GB crossing from child to parent for each
of the 5 trials, the adoption call and the timed-call checks (block_scaled_mm shape 23: 134 s
for a 0.53 s call), and a new child per shape where capturing the forward corrupted the CUDA
context (fused_moe, 9-10 s a shape). Per shape this
prints, for the reference submitted as the PyTorch baseline:

  in-process probes (no sandbox), each once on one input set:
    call_s       one forward, synchronized
    kernels      device records in one forward
    profiled_s   one forward under the adoption stage's profiler (CPU + CUDA activities),
                 with reading its records
    sample_s     one timing sample as measure_forward takes it (CUDA activity), with reading
  the harness (sandboxed child, warm pool), as a GPU worker runs the job:
    stage seconds (correctness, adoption, performance), the timing's own seconds, its method
    and sample count, and child restarts.

Usage (GPU host): python benchmarks/shape_cost.py --release DIR --operators a,b --shapes 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import _path  # noqa: F401 (the repository root on sys.path)
import torch

from evaluation.baselines import PYTORCH, baseline_source
from evaluation.harness.evaluate import EvaluationRequest, EvaluationSettings, evaluate
from evaluation.harness.isolation.child_process import WarmChildren
from evaluation.harness.operator_files import import_file, make_inputs, make_model
from evaluation.harness.release import load_release
from evaluation.harness.timing import L2Flusher, Sampler, prepare_timing
from evaluation.harness.timing_records import device_records


def probes(operator: Any, shape: Any) -> dict[str, Any]:
    inputs_module = import_file(operator.public.directory / "input.py", f"probe_in_{operator.name}")
    reference = import_file(operator.public.directory / "reference.py",
                            f"probe_ref_{operator.name}")
    device = torch.device("cuda")
    model = make_model(reference.Model, shape.init_kwargs, 0, device)
    inputs = make_inputs(inputs_module, shape.input_kwargs, 1, device)

    def forward(tensors: Any) -> object:
        with torch.no_grad():
            return model(**tensors)

    forward(inputs)
    torch.cuda.synchronize()
    calls = []
    for _ in range(3):
        started = time.perf_counter()
        forward(inputs)
        torch.cuda.synchronize()
        calls.append(time.perf_counter() - started)
    out: dict[str, Any] = {"call_s": statistics.median(calls)}
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    started = time.perf_counter()
    with torch.profiler.profile(activities=activities) as prof:
        forward(inputs)
        torch.cuda.synchronize()
    out["kernels"] = len(device_records(prof))
    out["profiled_s"] = time.perf_counter() - started
    # one profiled sample as the harness takes it (flush, events, markers, records parsed)
    sampler = Sampler(lambda i: forward(inputs), [inputs], L2Flusher("read"), None, None, None)
    started = time.perf_counter()
    sampler.profiled(1)
    out["sample_s"] = time.perf_counter() - started
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", type=Path, required=True)
    parser.add_argument("--operators", required=True)
    parser.add_argument("--shapes", type=int, default=1, help="N shapes per operator")
    parser.add_argument("--slowest", default="", help="operators whose slowest N shapes to take")
    parser.add_argument("--pick", choices=("slowest", "median"), default="median",
                        help="by the check's call seconds: the slowest N, or N from the middle")
    parser.add_argument("--check", type=Path, help="a check-release JSON (its call seconds)")
    parser.add_argument("--no-probes", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    release = load_release(args.release)
    call_seconds: dict[tuple[str, str], float] = {}
    if args.check:
        for row in json.loads(args.check.read_text())["shapes"]:
            call_seconds[(row["operator"], row["shape_id"])] = row.get("seconds") or 0.0
    settings = EvaluationSettings()
    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a smoke test, no probes
    warm = WarmChildren(device=device, dsl="triton", masked_paths=(release.root,),
                        settings=settings.sandbox)
    if device == "cuda":
        prepare_timing()
    warm.prepare()  # as a worker does before its first job: the child's start is not counted
    time.sleep(15)
    rows = []
    for name in args.operators.split(","):
        operator = release.operators[name]
        shapes = sorted(operator.public.shapes, key=lambda s: -call_seconds.get((name, s.id), 0.0))
        if args.pick == "median" and name not in args.slowest.split(","):
            middle = max(0, len(shapes) // 2 - args.shapes // 2)
            shapes = shapes[middle:]
        shapes = shapes[:args.shapes]
        for shape in shapes:
            row: dict[str, Any] = {"operator": name, "shape": shape.id}
            if device == "cuda" and not args.no_probes:
                try:
                    row.update(probes(operator, shape))
                except Exception as exc:  # noqa: BLE001 - reported, the next shape goes on
                    row["probe_error"] = f"{type(exc).__name__}: {exc}"[:300]
                torch.cuda.empty_cache()
            job = EvaluationRequest(operator=operator.public,
                                candidate_source=baseline_source(
                                    (operator.public.directory / "reference.py").read_text(),
                                    PYTORCH),
                                tolerance=operator.tolerance, shape_ids=[shape.id],
                                masked_paths=(release.root,))
            started = time.perf_counter()
            result = evaluate(job, settings, warm=warm)
            shape_result = result.shapes[0]
            timing = shape_result.timing or {}
            row.update(evaluated_s=time.perf_counter() - started, status=shape_result.status,
                       failed=shape_result.error and shape_result.error[:200],
                       stages={k: round(v, 2) for k, v in shape_result.stage_seconds.items()},
                       timing_s=timing.get("seconds_spent"), method=timing.get("method"),
                       n=timing.get("n"), kernels_per_forward=timing.get("kernels_per_forward"),
                       graph_error=(timing.get("graph_error") or "")[:160],
                       restarts=shape_result.child_restarts)
            print(json.dumps(row), flush=True)
            rows.append(row)
    warm.close()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
