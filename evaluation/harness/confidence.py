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
a second evaluation lands a tick away as often as not. So the error also holds the timer's
resolution as the quantisation error of a uniform rounding, step / sqrt(12), added in
quadrature: a floor that holds however the samples fall. The step is the timer's known one
(`timer_step`: the profiler's device records come in 32 ns ticks on the H200, CUDA events
resolve about 0.5 us), never read off the samples: all-equal samples have no spacing at all,
and one sample a nanosecond off the tick would make the smallest spacing 1 ns, the floor 32x
smaller (both were so before 2026-12-04).
It is the error of one evaluation: evaluations on different machines or days differ more
(docs/measurement.md, the repeat figures), which no interval from one run's samples can see.
One such difference is large and measured, so it is counted in: an eager forward's time holds
the host's latency (the launches, Python between them), and the host's state moves it from one
process to the next. Over three evaluations of the same eager forwards, each a new child,
the host's share of the time (median less the kernels' busy time) had a relative standard
deviation of 0.26 (root mean square over 12 shapes, H200, 2026-12-04) and 0.33 (18 shapes,
H100, 2026-12-05), 0.30 pooled (`benchmarks/eager_ties.py`), against a 0.43% median
difference per shape under graph replay. Within one evaluation the samples share the
process's state, so their bootstrap saw none of it.
`host_repeat_error` adds that share of the time the host exposes (the scored median less the
kernels' busy time) in quadrature: a device-bound eager forward (busy close to its median)
gets almost nothing, a launch-bound one the spread its evaluations really have, and two
evaluations of it tie on a board instead of ranking by chance (issue 43).

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

# The timers' steps: what one sample cannot resolve, whatever the samples show.
# The profiler's device records (CUPTI): 48 and 51 of 56 rms_norm medians on the H200 were
# whole multiples of 32 ns, the rest a nanosecond of conversion off (docs/measurement.md).
PROFILER_STEP_S = 32e-9
# CUDA events (cudaEventElapsedTime): "a resolution of around 0.5 microseconds", as the CUDA
# runtime documents it; the eager forwards' scored samples are event times.
EVENTS_STEP_S = 0.5e-6


def timer_step(span_measured_by: str | None, method: str | None = None) -> float:
    """The step of the timer that took a timing report's scored samples (TimingReport's
    `span_measured_by`, "profiler" or "events"). Reports that do not say: graph replay was
    always the profiler's span; anything else gets the coarser step, events'."""
    if span_measured_by == "profiler" or (span_measured_by is None and method == "graph"):
        return PROFILER_STEP_S
    return EVENTS_STEP_S


# The between-evaluation relative spread of the host's share of an eager forward's time
# (module docstring; benchmarks/eager_ties.py derives it from the saved runs).
HOST_REPEAT_RSE = 0.30


def host_repeat_error(median_s: float, busy_s: float | None) -> float:
    """The standard error one evaluation cannot see in an eager forward's median: the host's
    exposed time (median - busy, all of it when busy is unknown) times HOST_REPEAT_RSE."""
    busy = min(max(busy_s or 0.0, 0.0), median_s)
    return HOST_REPEAT_RSE * (median_s - busy)


def median_standard_error(samples: Sequence[float], timer_step_s: float = PROFILER_STEP_S,
                          replicates: int = REPLICATES, seed: int = SEED) -> float | None:
    """The standard error of the samples' median: the bootstrap spread and the timer's
    rounding, step / sqrt(12), in quadrature (never below the latter); None for fewer than
    2 samples."""
    values = list(samples)
    if len(values) < 2:
        return None
    if not timer_step_s > 0:
        raise ValueError(f"a timer's step must be positive, not {timer_step_s!r}")
    return math.hypot(bootstrap_spread(values, replicates, seed), timer_step_s / math.sqrt(12))


def bootstrap_spread(samples: Sequence[float], replicates: int = REPLICATES,
                     seed: int = SEED) -> float:
    """The bootstrap part alone: the spread of resampled medians (0 for fewer than 2 samples).
    What more samples can shrink, so the timing stage stops on it (timing.enough_samples);
    the timer's term above does not shrink with more samples."""
    values = list(samples)
    if len(values) < 2:
        return 0.0
    samples_array = np.asarray(values, dtype=np.float64)
    picks = np.random.default_rng(seed).integers(0, len(values), size=(replicates, len(values)))
    medians = np.median(samples_array[picks], axis=1)
    return float(medians.std()) if np.ptp(medians) > 0 else 0.0  # equal: exactly none
