"""Repeat figures of saved evaluations: how far two runs' per-shape medians and S_op lie apart.

Reads `worker_speed.py --json` files (each holds every run's per-shape medians), takes the runs
of one mode from each, and prints for every pair of consecutive runs the per-shape differences
(median, p90, max, in % of the pair's mean, with the shapes that differ most) and each run's
S_op: the median over shapes of attainment = SOL / median time, SOL from the release's
roofline.json on a hardware profile. It also counts the medians that are whole multiples of
the profiler's tick (32 ns on the H200), which is what bounds the max on the shortest kernels.

Usage: python benchmarks/repeat_figures.py --release DIR --operator rms_norm \
           [--hardware evaluation/hardware/H200.yaml] [--mode worker] RUN.json [OTHER.json ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from _path import REPO

from evaluation.harness.release import load_hardware_profile, load_release
from evaluation.harness.roofline import roofline_point

TICK_S = 32e-9


def percent_apart(a: float, b: float) -> float:
    return abs(a - b) / ((a + b) / 2) * 100


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", type=Path, required=True)
    parser.add_argument("--operator", required=True)
    parser.add_argument("--hardware", type=Path, default=REPO / "evaluation/hardware/H200.yaml")
    parser.add_argument("--mode", default="worker")
    parser.add_argument("runs", type=Path, nargs="+")
    args = parser.parse_args()
    operator = load_release(args.release).operator(args.operator)
    if not operator.roofline:
        sys.exit(f"{args.operator} has no roofline.json in {args.release}")
    hardware = load_hardware_profile(args.hardware)
    sol = {shape: roofline_point(line, hardware).sol_s for shape, line in operator.roofline.items()}
    runs = [(f"{path.name}#{i}", run["medians"]) for path in args.runs
            for i, run in enumerate(json.loads(path.read_text())[args.mode])]
    for name, medians in runs:
        timed = {k: v for k, v in medians.items() if v}
        ticks = sum(abs(v / TICK_S - round(v / TICK_S)) < 1e-6 for v in timed.values())
        s_op = statistics.median(sol[k] / v for k, v in timed.items())
        print(f"{name}: S_op {s_op:.4f} over {len(timed)} shapes; {ticks} medians are whole "
              f"multiples of {TICK_S * 1e9:.0f} ns")
    for (name_a, a), (name_b, b) in zip(runs, runs[1:], strict=False):
        shared = [k for k in a if a[k] and b.get(k)]
        apart = sorted((percent_apart(a[k], b[k]), k) for k in shared)
        values = [d for d, _ in apart]
        p90 = statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]
        s_a = statistics.median(sol[k] / a[k] for k in shared)
        s_b = statistics.median(sol[k] / b[k] for k in shared)
        print(f"{name_a} vs {name_b}: per-shape medians {statistics.median(values):.2f}% median, "
              f"{p90:.2f}% p90, {values[-1]:.2f}% max apart; S_op {percent_apart(s_a, s_b):.2f}%")
        for diff, shape in apart[-3:][::-1]:
            print(f"  shape {shape}: {a[shape] * 1e6:.3f} and {b[shape] * 1e6:.3f} us "
                  f"({diff:.2f}%)")


if __name__ == "__main__":
    main()
