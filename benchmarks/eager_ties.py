"""How far evaluations of the same eager forward move, and whether the board ties them (issue 43).

Reads `eager_fidelity.py` outputs (each forward and shape evaluated three times, each a new
sandboxed child) and prints, per file:
- the between-evaluation spread of the host's share of each shape's time (median - busy):
  the relative standard deviation of the three, its root mean square over shapes, the figure
  evaluation/harness/confidence.HOST_REPEAT_RSE is set from;
- for every pair of evaluations of one shape, whether a board would call them different: a
  two-sided test at 95% on their attainments, the lower one's error counted up to the
  higher one's (leaderboard/selectors.clearly_better), with each median's error as
  the evaluator now gives it (the timer's step and the host's share, confidence.py) and as it
  gave it before (the timer's step alone: within one child the samples of these forwards
  spread by well under their timer's step of 0.5 us against differences of tens of
  microseconds, so the bootstrap term is left out of both).

Usage: python benchmarks/eager_ties.py benchmarks/results/*/eager.json
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _path import REPO  # noqa: F401 - puts the repository on sys.path

from evaluation.harness.confidence import EVENTS_STEP_S, HOST_REPEAT_RSE, host_repeat_error

Z = 1.96  # leaderboard.selectors.INTERVAL_Z, without importing Django


def runs_by_shape(report: dict[str, Any]) -> dict[str, list[tuple[float, float | None]]]:
    """(median, busy) of each evaluation with the defaults, by forward/shape."""
    shapes: dict[str, list[tuple[float, float | None]]] = {}
    for operator, runs in report["harness"].items():
        for run in runs:
            if run["label"] != "new":
                continue
            for shape, row in run["shapes"].items():
                if row.get("median_s") and row.get("method") == "eager":
                    shapes.setdefault(f"{operator}/{shape}", []).append(
                        (row["median_s"], row.get("busy_s")))
    return {k: v for k, v in shapes.items() if len(v) >= 2}


def tied(first: tuple[float, float | None], second: tuple[float, float | None],
         error: Callable[[float, float | None], float]) -> bool:
    """Whether a board ties two evaluations of one shape: their attainments (SOL / median,
    the SOL cancels) and errors (a * se_T / T), the higher one's error in full and the
    lower one's up to it (leaderboard/selectors.clearly_better)."""
    scored = sorted(((1 / m, error(m, b) / m ** 2) for m, b in (first, second)), reverse=True)
    (high, high_se), (low, low_se) = scored
    return high - low <= Z * math.hypot(high_se, min(low_se, high_se))


def main(paths: list[str]) -> None:
    floor = EVENTS_STEP_S / math.sqrt(12)
    for path in paths:
        shapes = runs_by_shape(json.loads(Path(path).read_text()))
        spreads, pairs, tied_now, tied_before = [], 0, 0, 0
        for runs in shapes.values():
            host = [m - min(b or 0.0, m) for m, b in runs]
            if statistics.mean(host) > 0:
                spreads.append(statistics.stdev(host) / statistics.mean(host))
            for first, second in itertools.combinations(runs, 2):
                pairs += 1
                tied_now += tied(first, second, lambda m, b: math.hypot(
                    floor, host_repeat_error(m, b)))
                tied_before += tied(first, second, lambda m, b: floor)
        rms = math.sqrt(sum(s * s for s in spreads) / len(spreads)) if spreads else float("nan")
        print(f"{path}: {len(shapes)} shapes; the host's share between evaluations: relative "
              f"sd median {statistics.median(spreads):.3f}, rms {rms:.3f}, max {max(spreads):.3f}"
              f" (HOST_REPEAT_RSE {HOST_REPEAT_RSE})")
        print(f"  pairs of evaluations of one shape tied at 95%: {tied_now} of {pairs} now, "
              f"{tied_before} of {pairs} with the timer's step alone")


if __name__ == "__main__":
    main(sys.argv[1:])
