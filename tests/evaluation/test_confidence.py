"""A median's standard error (evaluation/harness/confidence.py): the bootstrap of the samples
and, however the samples fall, the timer's own step as a floor."""

from __future__ import annotations

import math

import pytest

from evaluation.harness.confidence import (
    EVENTS_STEP_S,
    PROFILER_STEP_S,
    bootstrap_spread,
    median_standard_error,
    timer_step,
)

TICK = PROFILER_STEP_S
FLOOR = TICK / math.sqrt(12)  # a uniform rounding to the tick


def _ticks(center: float, offsets: tuple[int, ...], repeat: int) -> list[float]:
    return [(round(center / TICK) + k) * TICK for k in offsets * repeat]


def test_all_equal_samples_keep_the_timers_step_as_their_error() -> None:
    # 40 samples on one tick: the bootstrap cannot move the median, the timer still could
    assert bootstrap_spread([2.016e-6] * 40) == 0.0
    assert median_standard_error([2.016e-6] * 40) == pytest.approx(FLOOR)
    # a coarser timer, a wider floor
    assert median_standard_error([2.016e-6] * 40, EVENTS_STEP_S) == pytest.approx(
        EVENTS_STEP_S / math.sqrt(12))


def test_a_sample_a_nanosecond_off_the_tick_does_not_shrink_the_floor() -> None:
    on_tick = [2.016e-6] * 39 + [2.048e-6]
    off_tick = [2.016e-6] * 38 + [2.017e-6, 2.048e-6]  # the smallest spacing is now 1 ns
    for samples in (on_tick, off_tick):
        error = median_standard_error(samples)
        assert error is not None and error >= FLOOR
    # the spacing of the samples plays no part: both errors are the same floor
    assert median_standard_error(off_tick) == pytest.approx(median_standard_error(on_tick))
    assert median_standard_error(off_tick) == pytest.approx(FLOOR)


def test_spread_samples_add_their_bootstrap_to_the_floor_and_repeat_exactly() -> None:
    samples = _ticks(1.5e-6, (-1, 0, 0, 1, 1, 2), 10)  # the median on a tick boundary
    spread = bootstrap_spread(samples)
    error = median_standard_error(samples)
    assert spread > 0 and error == pytest.approx(math.hypot(spread, FLOOR))
    assert median_standard_error(samples) == error  # a fixed seed: a rescore gives the same
    wider = [s + (k % 7 - 3) * TICK for k, s in enumerate(samples)]
    assert median_standard_error(wider) > error  # type: ignore[operator]
    assert median_standard_error([2e-6]) is None  # one sample: no error to give


def test_the_step_is_the_timers_that_took_the_samples() -> None:
    assert timer_step("profiler") == PROFILER_STEP_S
    assert timer_step("events", "eager") == EVENTS_STEP_S
    assert timer_step(None, "graph") == PROFILER_STEP_S  # graph replay: always the profiler
    assert timer_step(None, "eager") == EVENTS_STEP_S  # unknown: the coarser step
    assert timer_step(None) == EVENTS_STEP_S
    with pytest.raises(ValueError, match="positive"):
        median_standard_error([1e-6, 2e-6], 0.0)
