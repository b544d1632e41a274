"""Seconds per shape: the evaluator as the command line runs it against the GPU worker's path.

- "cli": `evaluate()` with a new sandboxed child per evaluation, as
  `python -m evaluation evaluate` does (the child's imports, CUDA context and private root
  are paid inside the evaluation).
- "worker": job specs run back to back through `evaluation.worker.jobs.run_job_spec`, what the
  Celery task runs (spec in, reports out), with the worker's children started ahead: each
  job takes the child started while the previous one ran. The first job is the one after
  the worker's start (its child was started at start-up, `prepare`).

Usage (on a GPU host, from the repository root):

    python benchmarks/worker_speed.py --release DIR --operator rms_norm \
        --candidate evaluation/sample_candidates/rms_norm/triton_native.py [--jobs 3] [--json OUT]

Prints a table last, then where the seconds went (`--steps`): per step, seconds per shape
summed over the shapes of each mode's last job (harness/steps.py; "child.X" is the trusted
side waiting on the child's request X, "in_child.X.Y" the child's own account of it). The
portal's cost per shape also includes the broker's round trips, which `scale_out.py`
measures end to end. Each run also keeps its per-shape medians (`medians`), so two runs of
one mode give the repeat figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from evaluation.harness.evaluate import EvaluationRequest, EvaluationSettings, evaluate
from evaluation.harness.isolation.sandbox import SandboxSettings
from evaluation.harness.release import load_release
from evaluation.harness.timing import TimingSettings
from evaluation.protocol import job_spec
from evaluation.worker.jobs import run_job_spec, warm_children, worker_device


def cli_runs(release: Path, operator: str, source: str, shapes: list[str],
             jobs: int, settings: EvaluationSettings) -> list[dict[str, Any]]:
    op = load_release(release).operator(operator)
    runs = []
    for _ in range(jobs):
        started = time.perf_counter()
        result = evaluate(EvaluationRequest(operator=op.public, candidate_source=source,
                                        tolerance=op.tolerance, shape_ids=shapes),
                          settings)
        seconds = time.perf_counter() - started
        runs.append(run_entry(seconds, result.to_dict()))
    return runs


def worker_runs(release: Path, operator: str, source: str, shapes: list[str],
                jobs: int, settings: EvaluationSettings) -> list[dict[str, Any]]:
    op = load_release(release).operator(operator)
    directory = op.public.directory
    everything = json.loads((directory / "shapes.json").read_text())
    spec_args = {
        "operator": operator, "reference_py": (directory / "reference.py").read_text(),
        "input_py": (directory / "input.py").read_text(),
        "shapes_json": json.dumps({k: everything[k] for k in shapes}),
        "candidate_source": source, "atol": op.tolerance.atol, "rtol": op.tolerance.rtol,
        "dsl": "triton", "dsl_ratio_threshold": 0.95, "hardware": "H200"}
    warm = warm_children(worker_device(), "triton", SandboxSettings())
    warm.prepare()  # as the worker does when it starts
    time.sleep(15)  # the worker waits for its first job: the child is ready by then
    runs = []
    try:
        for number in range(jobs):
            events: list[tuple[str, dict[str, Any]]] = []
            started = time.perf_counter()
            run_job_spec(job_spec(job_id=number, attempt=1, seed=number, **spec_args),
                         lambda kind, payload, into=events: into.append((kind, payload)),
                         settings, warm=warm)
            seconds = time.perf_counter() - started
            [result] = [p["result"] for k, p in events if k == "result"]
            runs.append(run_entry(seconds, result))
    finally:
        warm.close()
    return runs


def run_entry(seconds: float, result: dict[str, Any]) -> dict[str, Any]:
    """One evaluation's line of the report, from its result as JSON (either path)."""
    shapes = result["shapes"]
    return {"seconds": seconds, "shapes": len(shapes),
            "passed": sum(s["status"] == "passed" for s in shapes),
            "child_start_s": result["child_start_seconds"],
            "steps": summed_steps([s.get("steps") or {} for s in shapes]),
            "shape_seconds": sum(s["seconds"] for s in shapes),
            "medians": {s["shape_id"]: (s.get("timing") or {}).get("median_s") for s in shapes},
            "samples": {s["shape_id"]: (s.get("timing") or {}).get("n") for s in shapes}}


def summed_steps(per_shape: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The shapes' step reports added up: {step: {"seconds": s, "count": n}}."""
    total: dict[str, dict[str, float]] = {}
    for report in per_shape:
        for name, seconds in (report.get("seconds") or {}).items():
            entry = total.setdefault(name, {"seconds": 0.0, "count": 0})
            entry["seconds"] += seconds
            entry["count"] += (report.get("counts") or {}).get(name, 1)
    return total


def print_steps(mode: str, run: dict[str, Any], limit: int = 40) -> None:
    """One run's steps, largest first: seconds per shape, share of the shapes' time, calls
    per shape."""
    shapes = max(run["shapes"], 1)
    print(f"\n{mode}: where a shape's {run['shape_seconds'] / shapes:.3f} s went "
          f"(job {run['seconds'] / shapes:.3f} s/shape), per shape:")
    print(f"  {'step':52} {'s/shape':>9} {'share':>7} {'n/shape':>8}")
    ordered = sorted(run["steps"].items(), key=lambda kv: -kv[1]["seconds"])
    for name, entry in ordered[:limit]:
        share = entry["seconds"] / run["shape_seconds"] if run["shape_seconds"] else 0.0
        print(f"  {name:52} {entry['seconds'] / shapes:9.4f} {share:7.1%} "
              f"{entry['count'] / shapes:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", type=Path, required=True)
    parser.add_argument("--operator", required=True)
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--shapes", type=int, default=0, help="the first N shapes; 0: all")
    parser.add_argument("--modes", default="cli,worker")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--steps", action="store_true", help="print each mode's step table")
    parser.add_argument("--stop-rule", default=TimingSettings().stop_rule,
                        choices=["median", "mean"], help="what the sampling stops on "
                        "(TimingSettings.stop_rule)")
    args = parser.parse_args()
    settings = EvaluationSettings(timing=TimingSettings(stop_rule=args.stop_rule))
    op = load_release(args.release).operator(args.operator)
    shapes = [s.id for s in op.public.shapes if not s.id.startswith("dev-")]
    shapes = shapes[:args.shapes] if args.shapes else shapes
    source = args.candidate.read_text()
    report: dict[str, Any] = {"operator": args.operator, "shapes": len(shapes),
                              "stop_rule": args.stop_rule}
    for mode in args.modes.split(","):
        runner = cli_runs if mode == "cli" else worker_runs
        report[mode] = runner(args.release, args.operator, source, shapes, args.jobs, settings)
        for run in report[mode]:
            print(f"{mode:6} {run['seconds']:7.1f} s  {run['seconds'] / run['shapes']:.3f} s/shape"
                  f"  passed {run['passed']}/{run['shapes']}  child start "
                  f"{', '.join(f'{t:.1f}' for t in run['child_start_s'])} s", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{args.operator}, {len(shapes)} shapes; seconds per shape (median over jobs):")
    per_shape = {}
    for mode in args.modes.split(","):
        values = [r["seconds"] / r["shapes"] for r in report[mode]]
        steady = values[1:] or values  # the worker's first job follows its start-up
        per_shape[mode] = statistics.median(steady)
        print(f"  {mode:6} {per_shape[mode]:.3f} (first job {values[0]:.3f})")
    if "cli" in per_shape and "worker" in per_shape:
        print(f"  worker / cli: {per_shape['worker'] / per_shape['cli']:.2f}")
    if args.steps:
        for mode in args.modes.split(","):
            print_steps(mode, report[mode][-1])


if __name__ == "__main__":
    main()
