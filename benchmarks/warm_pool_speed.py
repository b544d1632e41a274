"""One operator's whole evaluation, job start to last result, on the GPU worker's path with its
pool of warm children (issue 45: the public rms_norm's 56 shapes in <= 5 s), and through the
portal (within 1.15x of it).

Worker path: job specs run back to back through `evaluation.worker.jobs.run_job_spec`, as the
Celery task runs them, with the worker's pool (`warm_children`, ATREX_WARM_CHILDREN per DSL)
prepared as the worker prepares it at start; jobs follow each other with no pause (the first
waits --settle-s after the pool's start, as a worker idles before its first job). Per job it
prints the seconds from the call to the last shape's progress report ("to last result", the
target), to the result message ("to result": what closing the child adds), the harness's
wait for its child (`child_start_wait`, summed over the shapes) and whether the pool had to
start a child on the spot (cold).

Portal path (--portal): `scale_out.py` with one GPU worker and the same candidate, N
submissions one after another (upload to last job's end, per job), printed against the
worker path's median as a ratio.

Usage (repository root, a GPU host):

    python benchmarks/warm_pool_speed.py --release /path/to/atrex-bench --operator rms_norm \
        --candidate evaluation/sample_candidates/rms_norm/triton_native.py \
        [--jobs 5] [--pool 2] [--portal] [--json OUT]

Without a GPU it runs the interpreter on the dev shapes (--shapes 'dev-*'): plumbing only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _path import REPO

from evaluation.harness.evaluate import EvaluationSettings
from evaluation.harness.isolation.sandbox import SandboxSettings
from evaluation.harness.release import load_release
from evaluation.local_evaluation import select_shapes
from evaluation.protocol import EventKind, job_spec
from evaluation.worker.jobs import run_job_spec, warm_children, worker_device

TARGET_S = 5.0
PORTAL_RATIO = 1.15


def worker_jobs(release: Path, operator: str, source: str, shapes: list[str], jobs: int,
                settle_s: float) -> list[dict[str, Any]]:
    op = load_release(release).operator(operator)
    directory = op.public.directory
    everything = json.loads((directory / "shapes.json").read_text())
    spec_args = {
        "operator": operator, "reference_py": (directory / "reference.py").read_text(),
        "input_py": (directory / "input.py").read_text(),
        "shapes_json": json.dumps({k: everything[k] for k in shapes}),
        "candidate_source": source, "atol": op.tolerance.atol, "rtol": op.tolerance.rtol,
        "dsl": "triton", "dsl_ratio_threshold": 0.95, "hardware": "H200"}
    pool = warm_children(worker_device(), "triton", SandboxSettings())
    pool.prepare()  # as the worker does when it starts (evaluation/worker/app.py)
    time.sleep(settle_s)
    runs = []
    try:
        for number in range(jobs):
            marks: dict[str, float] = {}
            events: list[tuple[str, dict[str, Any]]] = []
            cold_before = pool.cold_takes

            def publish(kind: EventKind, payload: dict[str, Any], into: list[Any] = events,
                        at: dict[str, float] = marks) -> None:
                into.append((kind.value, payload))
                at[kind.value] = time.perf_counter()  # the last of each kind

            started = time.perf_counter()
            run_job_spec(job_spec(job_id=number, attempt=1, seed=number, **spec_args), publish,
                         EvaluationSettings(), warm=pool)
            ended = time.perf_counter()
            [result] = [p["result"] for k, p in events if k == "result"]
            shapes_done = result["shapes"]
            child_wait = sum(float(((s.get("steps") or {}).get("seconds") or {}).get(
                "child_start_wait") or 0.0) for s in shapes_done)
            runs.append({
                "job": number, "shapes": len(shapes_done),
                "passed": sum(s["status"] == "passed" for s in shapes_done),
                "to_last_result_s": marks.get("progress", ended) - started,
                "to_result_s": marks.get("result", ended) - started,
                "child_start_wait_s": child_wait,
                "cold_child": pool.cold_takes > cold_before,
                "harness_s": sum(float(s.get("seconds") or 0.0) for s in shapes_done)})
            run = runs[-1]
            print(f"job {number}: {run['shapes']} shapes, {run['passed']} passed; to last "
                  f"result {run['to_last_result_s']:.2f} s, to result {run['to_result_s']:.2f} "
                  f"s; waiting for the child {child_wait:.2f} s"
                  + (" (cold: the pool was empty)" if run["cold_child"] else ""), flush=True)
    finally:
        pool.close()
    return runs


def portal_jobs(release: Path, operator: str, candidate: Path, jobs: int) -> dict[str, Any]:
    """scale_out.py, one GPU worker, `jobs` submissions of the candidate."""
    with tempfile.TemporaryDirectory(prefix="atrex-pool-portal-") as folder:
        out = Path(folder) / "scale.json"
        done = subprocess.run(
            [sys.executable, str(REPO / "benchmarks" / "scale_out.py"), "--workers", "1",
             "--submissions", str(jobs), "--release", str(release),
             f"--candidate={operator}={candidate}", "--json", str(out)],
            cwd=REPO, env=os.environ.copy(), capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"scale_out.py failed:\n{done.stderr[-4000:]}")
        print(done.stdout, end="")
        phase: dict[str, Any] = json.loads(out.read_text())[0]
    return phase


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", type=Path, required=True)
    parser.add_argument("--operator", default="rms_norm")
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=5)
    parser.add_argument("--pool", type=int, default=None,
                        help="children kept warm (ATREX_WARM_CHILDREN; default the worker's)")
    parser.add_argument("--shapes", default=None, help="globs (default: all but dev-* on a "
                        "GPU, dev-* on a CPU)")
    parser.add_argument("--settle-s", type=float, default=15.0)
    parser.add_argument("--portal", action="store_true", help="also through the portal")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.pool is not None:
        os.environ["ATREX_WARM_CHILDREN"] = str(args.pool)
    import torch

    op = load_release(args.release).operator(args.operator)
    ids = [s.id for s in op.public.shapes]
    default = "dev-*" if not torch.cuda.is_available() else None
    chosen = select_shapes(ids, args.shapes or default) if (args.shapes or default) \
        else [i for i in ids if not i.startswith("dev-")]
    source = args.candidate.read_text()
    runs = worker_jobs(args.release, args.operator, source, chosen, args.jobs, args.settle_s)
    # The first job after the worker's start is the usual case only for an idle worker;
    # the median over all jobs is the figure (back-to-back jobs are the loop's case).
    median = statistics.median(r["to_last_result_s"] for r in runs)
    report: dict[str, Any] = {
        "operator": args.operator, "shapes": len(chosen), "device": worker_device(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "pool": os.environ.get("ATREX_WARM_CHILDREN", "default"), "worker": runs,
        "worker_median_to_last_result_s": median, "target_s": TARGET_S,
        "worker_target_met": median <= TARGET_S}
    print(f"worker path: median {median:.2f} s from job start to last result over "
          f"{len(runs)} jobs ({len(chosen)} shapes); target {TARGET_S:.1f} s: "
          f"{'met' if median <= TARGET_S else 'NOT met'}")
    if args.portal:
        phase = portal_jobs(args.release.resolve(), args.operator, args.candidate.resolve(),
                            args.jobs)
        per_job = phase["seconds"] / max(phase["submissions"], 1)
        ratio = per_job / median if median else None
        report["portal"] = phase
        report["portal_seconds_per_job"] = per_job
        report["portal_ratio"] = ratio
        print(f"through the portal: {per_job:.2f} s per job (upload to last job's end / "
              f"jobs); {ratio:.2f}x the worker path; target {PORTAL_RATIO}x: "
              f"{'met' if ratio is not None and ratio <= PORTAL_RATIO else 'NOT met'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
