"""How often two kernels a true 3% apart are tied on a board, under the old tie rule (their 95%
intervals overlap) and the new one (a two-sample test of the difference at 95%:
|a - b| <= 1.96 * sqrt(se_a^2 + se_b^2); leaderboard/selectors.assign_ranks).

No GPU: each evaluation is simulated down to its timing samples and then goes through the
portal's own code. Per shape, samples of the true time with multiplicative log-normal noise
(the per-sample noise, e.g. 2% or 5%) rounded to the profiler's 32 ns tick, drawn in the
evaluator's batches (20, then 40, 80, 160 more: 300 at most, as the 1 s time cap allows for
~10 us kernels) until the median's bootstrap spread is under 1% of it or within one tick
(`--sampling stop`, the evaluator's rule), or exactly 20 samples (`--sampling fixed`). Then:
the median and its standard error (evaluation/harness/confidence.median_standard_error), the
attainment SOL / median and its error (leaderboard/scoring.attainment_error), S_op and its 95%
interval (scoring.summarise and combine: the median over the operator's shapes), and the two
rows ranked by assign_ranks (new) or by overlap (old). Kernel B's true attainment is 0.97 of
A's on every shape; a second case with no true difference gives each rule's rate of telling
two equal kernels apart (a 95% test does so 5% of the time by design).

Usage: python benchmarks/tie_rule_simulation.py [--trials 1000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _path import REPO

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
import django  # noqa: E402

django.setup()  # the selectors import the models; nothing here reads a database

from evaluation.harness.confidence import (  # noqa: E402
    PROFILER_STEP_S,
    bootstrap_spread,
    median_standard_error,
)
from leaderboard.scoring import (  # noqa: E402
    ShapeOutcome,
    attainment_error,
    combine,
    summarise,
)
from leaderboard.selectors import assign_ranks  # noqa: E402

TICK = PROFILER_STEP_S
BATCHES = (20, 40, 80, 160)  # the evaluator's: 20, 60, 140, 300 samples in all
TARGET_RSE = 0.01
# Five shapes of one operator: true times of kernel A and an attainment near 0.5 each
SHAPE_TIMES_S = (4e-6, 8e-6, 16e-6, 40e-6, 120e-6)
ATTAINMENT_A = 0.5


@dataclass(frozen=True)
class Case:
    noise: float  # per-sample, relative (log-normal sigma)
    shapes: int
    sampling: str  # "stop" or "fixed"
    ratio: float  # B's true attainment / A's


def samples(rng: np.random.Generator, true_s: float, noise: float, sampling: str) -> list[float]:
    """One shape's timing samples, as the evaluator would take them."""
    taken: list[float] = []
    for batch in (BATCHES if sampling == "stop" else (20,)):
        drawn = true_s * np.exp(rng.normal(0.0, noise, size=batch))
        taken.extend((np.round(drawn / TICK) * TICK).tolist())
        middle = statistics.median(taken)
        spread = bootstrap_spread(taken)
        if spread <= TICK or spread / middle < TARGET_RSE:
            break
    return taken


def evaluation(rng: np.random.Generator, case: Case, attainment_ratio: float) -> dict[str, Any]:
    """One kernel evaluated once: its board row (S_op as S_agg of a one-operator board)."""
    outcomes = []
    for i, base_s in enumerate(SHAPE_TIMES_S[:case.shapes]):
        sol_s = ATTAINMENT_A * base_s
        true_s = sol_s / (ATTAINMENT_A * attainment_ratio)
        taken = samples(rng, true_s, case.noise, case.sampling)
        median_s = statistics.median(taken)
        attainment = sol_s / median_s
        outcomes.append(ShapeOutcome(
            operator="op", shape_id=str(i), correct=True, verdict="native",
            attainment=attainment,
            attainment_se=attainment_error(attainment, median_s, median_standard_error(taken))))
    score = combine(summarise(outcomes), {"op": 1.0})
    return {"aggregate": score.aggregate, "interval": score.intervals["aggregate"],
            "ranked_by": "aggregate", "badges": []}


def overlap_rank_tie(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The rule before 2026-12-04: the higher row's low end not above the lower row's high."""
    high, low = (a, b) if a["aggregate"] >= b["aggregate"] else (b, a)
    return bool(high["interval"][0] <= low["interval"][1])


def run_case(case: Case, trials: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    old_ties = new_ties = b_ahead = 0
    se_a: list[float] = []
    n_samples: list[int] = []
    for _ in range(trials):
        a, b = evaluation(rng, case, 1.0), evaluation(rng, case, case.ratio)
        old_ties += overlap_rank_tie(a, b)
        rows = sorted([a, b], key=lambda r: -r["aggregate"])
        assign_ranks(rows)
        new_ties += rows[0]["rank"] == rows[1]["rank"]
        b_ahead += b["aggregate"] > a["aggregate"]
        se_a.append((a["interval"][1] - a["aggregate"]) / 1.96)
    # samples per shape under this sampling (one more kernel, for the figure only)
    for base_s in SHAPE_TIMES_S[:case.shapes]:
        n_samples.append(len(samples(rng, base_s, case.noise, case.sampling)))
    return {"noise": case.noise, "shapes": case.shapes, "sampling": case.sampling,
            "true_difference": round(1 - case.ratio, 4), "trials": trials,
            "tied_before": old_ties / trials, "tied_after": new_ties / trials,
            "b_scored_higher": b_ahead / trials,
            "median_se_of_s_relative": statistics.median(se_a) / ATTAINMENT_A,
            "samples_per_shape": n_samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261204)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cases = [Case(noise, shapes, sampling, ratio)
             for ratio in (0.97, 1.0)
             for sampling in ("stop", "fixed")
             for shapes in (1, 5)
             for noise in (0.02, 0.05)]
    started = time.perf_counter()
    results = []
    print(f"{'true diff':>9} {'sampling':>8} {'shapes':>6} {'noise':>5} {'n/shape':>16} "
          f"{'se(S)/S':>8} {'tied before':>11} {'tied after':>10} {'B higher':>8}")
    for k, case in enumerate(cases):
        result = run_case(case, args.trials, args.seed + k)
        results.append(result)
        print(f"{result['true_difference']:>9.0%} {case.sampling:>8} {case.shapes:>6} "
              f"{case.noise:>5.0%} {str(result['samples_per_shape']):>16} "
              f"{result['median_se_of_s_relative']:>8.2%} {result['tied_before']:>11.1%} "
              f"{result['tied_after']:>10.1%} {result['b_scored_higher']:>8.1%}", flush=True)
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(),
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "seconds": round(time.perf_counter() - started, 1), "trials": args.trials,
            "seed": args.seed, "shape_times_s": SHAPE_TIMES_S, "attainment_a": ATTAINMENT_A,
            "batches": BATCHES, "target_rse": TARGET_RSE, "tick_s": TICK,
            "script": str(Path(__file__).relative_to(REPO))}
    print(f"{meta['seconds']} s", file=sys.stderr)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
