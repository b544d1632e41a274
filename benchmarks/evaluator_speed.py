"""Evaluator seconds per shape on a GPU: 5 correctness trials, adoption and timing.

Evaluates the Triton sample candidate of every fixture operator on all its real shapes,
twice: "cold" starts a sandboxed child per evaluation (what the command line does);
"warm" takes children from a WarmChildren pool (what a GPU worker running jobs back to
back does: the next child's imports and CUDA start-up happen while the current job runs).

Usage (on the GPU host): python benchmarks/evaluator_speed.py
"""

from __future__ import annotations

import argparse
import sys
import time

from _path import REPO

from evaluation.harness.evaluate import EvaluationRequest, EvaluationSettings, evaluate
from evaluation.harness.isolation.child_process import WarmChildren
from evaluation.harness.release import load_release

RELEASE = REPO / "evaluation" / "releases" / "atrex-fixture"
CANDIDATES = REPO / "evaluation" / "sample_candidates"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modes", default="warm,cold")
    args = parser.parse_args()
    release = load_release(RELEASE)
    settings = EvaluationSettings()
    jobs = []
    for name, op in sorted(release.operators.items()):
        shapes = [s.id for s in op.public.shapes if not s.id.startswith("dev-")]
        jobs.append(EvaluationRequest(
            operator=op.public, candidate_source=(CANDIDATES / name / "triton_native.py").read_text(),
            tolerance=op.tolerance, shape_ids=shapes, masked_paths=(release.root,)))
    print(f"{'mode':5} {'operator':22} {'shapes':>6} {'seconds':>8} {'s/shape':>7} "
          f"{'child start s':>13} {'slowest stage':>24}", flush=True)
    for mode in args.modes.split(","):
        warm = WarmChildren(device="cuda", dsl="triton", masked_paths=(release.root,),
                            settings=settings.sandbox) if mode == "warm" else None
        if warm is not None:
            warm.take().close()  # start the pool; give the first child the usual head start
            time.sleep(10)
        total, shapes = 0.0, 0
        try:
            for job in jobs:
                started = time.perf_counter()
                result = evaluate(job, settings, warm=warm)
                seconds = time.perf_counter() - started
                assert all(s.status == "passed" for s in result.shapes), result.to_json()
                slowest = max(((stage, t, s.shape_id) for s in result.shapes
                               for stage, t in s.stage_seconds.items()), key=lambda x: x[1])
                total += seconds
                shapes += len(result.shapes)
                print(f"{mode:5} {job.operator.name:22} {len(result.shapes):6} {seconds:8.2f} "
                      f"{seconds / len(result.shapes):7.2f} {sum(result.child_start_seconds):13.2f} "
                      f"{slowest[0]:>12} {slowest[1]:5.2f} s", flush=True)
        finally:
            if warm is not None:
                warm.close()
        print(f"{mode:5} {'all':22} {shapes:6} {total:8.2f} {total / shapes:7.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
