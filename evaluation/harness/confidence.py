"""How sure a time is: the standard error of a shape's median time, from its timing samples.

A shape's scored time is the median of its samples (timing.py). Two evaluations of the same
kernel give medians that differ (on the H200 by 0.45% per shape in the median and up to
4.3%, mostly whole 32 ns profiler ticks on kernels of 1-2 µs: docs/measurement.md), so a
board that ranks by them needs to know how far a median can move. The bootstrap answers it
without assumptions about the samples' distribution: draw as many samples as there are,
with replacement, take the median, again and again; the spread of those medians is the
median's standard error.

A tick-quantised median moves in whole ticks, and there the bootstrap alone says too little:
with half the samples on one tick every resampled median is that tick, an error of 0, while
a second evaluation lands a tick away as often as not. So the error also holds the samples'
own resolution (the smallest step between two distinct samples, the profiler's 32 ns on the
H200) as the quantisation error of a uniform rounding, step / sqrt(12), added in quadrature.
It is the error of one evaluation: evaluations on different machines or days differ more
(docs/measurement.md, the repeat figures), which no interval from one run's samples can see.

Deterministic (a fixed seed): the same samples always give the same error, so a rescore
reproduces every interval. Imports no Django; the trusted side computes it from the
samples the timing report carries, and scoring (leaderboard/scoring.py) turns it into
intervals on S_op and S_agg.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

REPLICATES = 200
SEED = 20261203


def median_standard_error(samples: Sequence[float], replicates: int = REPLICATES,
                          seed: int = SEED) -> float | None:
    """The bootstrap standard error of the samples' median; None for fewer than 2 samples."""
    values = list(samples)
    if len(values) < 2:
        return None
    return math.hypot(bootstrap_spread(values, replicates, seed),
                      resolution(values) / math.sqrt(12))


def bootstrap_spread(samples: Sequence[float], replicates: int = REPLICATES,
                     seed: int = SEED) -> float:
    """The bootstrap part alone: the spread of resampled medians (0 for fewer than 2 samples).
    What more samples can shrink, so the timing stage stops on it (timing.enough_samples);
    the resolution term above does not shrink with more samples."""
    values = list(samples)
    if len(values) < 2:
        return 0.0
    samples_array = np.asarray(values, dtype=np.float64)
    picks = np.random.default_rng(seed).integers(0, len(values), size=(replicates, len(values)))
    medians = np.median(samples_array[picks], axis=1)
    return float(medians.std()) if np.ptp(medians) > 0 else 0.0  # equal: exactly none


def resolution(samples: Sequence[float]) -> float:
    """The smallest step between two distinct samples (0 when all are equal)."""
    distinct = sorted(set(samples))
    return min((b - a for a, b in zip(distinct, distinct[1:], strict=False)), default=0.0)
