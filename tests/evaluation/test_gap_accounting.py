"""Every device activity between two timed samples is the harness's own (issue 40): the gaps
of synthetic device records checked against the trusted side's allowance (pure functions of
evaluation.harness.timing; no GPU needed)."""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("triton")

from evaluation.harness.timing_records import (
    END_MARKER,
    RETURNED_MARKER,
    GapAllowance,
    WorkOutsideWindow,
    check_gaps,
)

SWEEP = "_atrex_l2_flush_read"
DRAW = "void at::native::distribution_elementwise_grid_stride_kernel<float, 4>"
CAST = "void at::native::vectorized_elementwise_kernel<4, bfloat16_copy>"
EQUAL = "void at::native::reduce_kernel<512, 1, equal>"
COPY = "Memcpy DtoD (Device -> Device)"
ALLOWANCE = GapAllowance(draw=Counter({DRAW: 2, CAST: 1}), per_check=Counter({EQUAL: 2}))


def gap(*names: str) -> list[tuple[str, int, int]]:
    return [(name, 0, 0) for name in names]


def window(*names: str) -> list[tuple[str, int, int]]:
    return [(SWEEP, 0, 0), *gap(*names), (RETURNED_MARKER, 0, 0), (END_MARKER, 0, 0)]


def records(*parts: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    stamped, clock = [], 0
    for part in parts:
        for name, _, _ in part:
            clock += 10
            stamped.append((name, clock, clock + 5))
    return stamped


def test_gaps_holding_the_harness_draw_and_copies_pass() -> None:
    trace = records(gap(DRAW, DRAW, CAST, COPY, COPY), window("my_kernel"),
                    gap(DRAW, CAST, DRAW, COPY, COPY), window("my_kernel"), gap())
    check_gaps(trace, SWEEP, ALLOWANCE, [0, 0, 0], {"my_kernel"})


def test_a_kernel_the_harness_did_not_launch_between_samples_fails_the_shape() -> None:
    # the persistent dispatch mode of tests/adversarial/candidates: the output computed
    # during the refill, the forward a tiny kernel
    trace = records(gap(DRAW, DRAW, CAST, COPY), window("_touch_kernel"),
                    gap(DRAW, DRAW, CAST, COPY, "rsqrt_kernel", "mul_kernel"),
                    window("_touch_kernel"), gap())
    with pytest.raises(WorkOutsideWindow, match=r"2 kernel\(s\) the harness did not launch "
                                                r"\(mul_kernel x1, rsqrt_kernel x1\)"):
        check_gaps(trace, SWEEP, ALLOWANCE, [0, 0, 0], {"_touch_kernel"})


def test_more_of_a_harness_kernel_than_one_draw_launches_is_work_outside_the_window() -> None:
    # the cheat's torch work happens to use the draw's own kernels: the count gives it away
    trace = records(gap(DRAW, DRAW, CAST, CAST), window("k"), gap())
    with pytest.raises(WorkOutsideWindow, match="x1"):
        check_gaps(trace, SWEEP, ALLOWANCE, [0, 0], {"k"})


def test_a_checks_kernels_are_allowed_only_in_the_gap_where_a_call_was_saved() -> None:
    trace = records(gap(DRAW, DRAW, CAST), window("k"), gap(EQUAL, EQUAL, DRAW, DRAW, CAST),
                    window("k"), gap(EQUAL, EQUAL))
    check_gaps(trace, SWEEP, ALLOWANCE, [0, 1, 1], {"k"})
    with pytest.raises(WorkOutsideWindow, match="reduce_kernel"):
        check_gaps(trace, SWEEP, ALLOWANCE, [0, 1, 0], {"k"})


def test_a_kernel_the_forward_also_ran_is_named_first() -> None:
    trace = records(gap("zeta_helper", "my_kernel"), window("my_kernel"), gap())
    with pytest.raises(WorkOutsideWindow, match=r"\(my_kernel x1, zeta_helper x1\)"):
        check_gaps(trace, SWEEP, ALLOWANCE, [0, 0], {"my_kernel"})


def test_the_allowance_crosses_the_channel_as_plain_counts_and_bad_ones_are_refused() -> None:
    assert GapAllowance.from_wire(ALLOWANCE.to_wire()) == ALLOWANCE
    assert GapAllowance.from_wire(None) is None
    with pytest.raises(ValueError):
        GapAllowance.from_wire({"draw": {DRAW: "2"}, "per_check": {}})
