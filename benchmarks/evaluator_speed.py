"""Evaluator seconds per shape on a GPU: 5 correctness trials, adoption and timing.

Evaluates the Triton sample candidate of every fixture operator on all its real shapes,
twice: "cold" starts a sandboxed child per evaluation (what the command line does);
"warm" takes children from a WarmChildren pool (what a GPU worker running jobs back to
back does: the next child's imports and CUDA start-up happen while the current job runs).

Usage (on the GPU host): python benchmarks/evaluator_speed.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluation.harness.evaluate import EvaluationJob, EvaluationSettings, evaluate  # noqa: E402
from evaluation.harness.release import load_release  # noqa: E402
from evaluation.harness.sandbox import WarmChildren  # noqa: E402

RELEASE = REPO / "evaluation" / "releases" / "atrex-fixture"
CANDIDATES = REPO / "evaluation" / "sample_candidates"


def main() -> int:
    release = load_release(RELEASE)
    settings = EvaluationSettings()
    jobs = []
    for name, op in sorted(release.operators.items()):
        shapes = [s.id for s in op.public.shapes if not s.id.startswith("dev-")]
        jobs.append(EvaluationJob(
            operator=op.public, candidate_source=(CANDIDATES / name / "triton_native.py").read_text(),
            tolerance=op.tolerance, shape_ids=shapes, masked_paths=(release.root,)))
    rows: dict[str, dict[str, tuple[int, float, float]]] = {}
    for mode in ("cold", "warm"):
        warm = WarmChildren(device="cuda", dsl="triton", masked_paths=(release.root,),
                            settings=settings.sandbox) if mode == "warm" else None
        if warm is not None:
            warm.take().close()  # start the pool; give the first child the usual head start
            time.sleep(10)
        try:
            for job in jobs:
                started = time.perf_counter()
                result = evaluate(job, settings, warm=warm)
                seconds = time.perf_counter() - started
                assert all(s.status == "passed" for s in result.shapes), result.to_json()
                rows.setdefault(job.operator.name, {})[mode] = (
                    len(result.shapes), seconds, sum(result.child_start_seconds))
        finally:
            if warm is not None:
                warm.close()
    print(f"{'operator':22} {'shapes':>6} {'cold s':>7} {'s/shape':>7} {'warm s':>7} "
          f"{'s/shape':>7} {'child start cold':>16}")
    totals = {"cold": 0.0, "warm": 0.0}
    shapes_total = 0
    for name, modes in rows.items():
        n, cold, start = modes["cold"]
        _, warm_s, _ = modes["warm"]
        totals["cold"] += cold
        totals["warm"] += warm_s
        shapes_total += n
        print(f"{name:22} {n:6} {cold:7.2f} {cold / n:7.2f} {warm_s:7.2f} {warm_s / n:7.2f} "
              f"{start:16.2f}")
    print(f"{'all':22} {shapes_total:6} {totals['cold']:7.2f} {totals['cold'] / shapes_total:7.2f} "
          f"{totals['warm']:7.2f} {totals['warm'] / shapes_total:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
