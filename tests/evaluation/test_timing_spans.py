"""Splitting profiler device records into per-forward spans (pure; no GPU needed)."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from evaluation.harness.timing import (  # noqa: E402
    TimingSettings,
    enough_samples,
    forward_spans,
    next_batch_size,
)

MARK = "_atrex_l2_flush_read"
END = "_atrex_sample_end"


def test_each_span_runs_from_first_kernel_start_to_last_kernel_end() -> None:
    records = [
        (MARK, 0, 100),
        ("a", 110, 150), ("b", 160, 210),  # one forward, two kernels with a gap
        (END, 220, 221),
        ("refill", 230, 260),  # new input contents for the next sample: not the candidate's
        (MARK, 300, 400),
        ("a", 420, 470),
        (END, 480, 481),
        ("check_copy", 490, 500),  # a spot check's copy of the outputs: not counted either
    ]
    spans, busy, counts = forward_spans(records, MARK, END)
    assert spans == pytest.approx([100e-9, 50e-9])
    assert busy == pytest.approx([90e-9, 50e-9])  # the 10 ns gap between a and b is not busy
    assert counts == [2, 1]


def test_busy_time_counts_overlapping_kernels_once_and_gaps_not_at_all() -> None:
    records = [(MARK, 0, 1),
               ("main", 10, 50), ("side_stream", 20, 70),  # overlap: 10..70 busy
               ("late", 100, 130),  # a host gap 70..100 (an eager launch), then 30 ns
               ("inside", 105, 110),  # wholly inside `late`
               (END, 140, 141)]
    spans, busy, _ = forward_spans(records, MARK, END)
    assert spans == pytest.approx([120e-9])
    assert busy == pytest.approx([90e-9])


def test_records_outside_a_sample_are_ignored() -> None:
    spans, _, _ = forward_spans([("warmup", 0, 10), (MARK, 20, 30), ("a", 40, 45), (END, 46, 47),
                                 ("refill", 50, 90)], MARK, END)
    assert spans == pytest.approx([5e-9])


def test_a_sample_with_no_kernel_yields_no_span() -> None:
    spans, _, _ = forward_spans([(MARK, 0, 1), (END, 1, 2), (MARK, 2, 3), ("a", 4, 6),
                                 (END, 7, 8)], MARK, END)
    assert spans == pytest.approx([2e-9])


@pytest.mark.parametrize("records", [
    # the candidate's work in a kernel named like the end marker: an end outside a sample
    [(MARK, 0, 1), ("touch", 2, 3), (END, 4, 90), (END, 91, 92)],
    # a kernel named like the start marker inside a sample
    [(MARK, 0, 1), (MARK, 2, 50), ("a", 51, 60), (END, 61, 62)],
    # a start marker never closed
    [(MARK, 0, 1), ("a", 2, 3)],
])
def test_markers_out_of_step_mean_forged_markers(records: list[tuple[str, int, int]]) -> None:
    from evaluation.harness.timing import MarkersForged

    with pytest.raises(MarkersForged):
        forward_spans(records, MARK, END)


def test_a_real_timing_report_passes_the_parents_check_and_a_forged_one_fails() -> None:
    from evaluation.harness.evaluate import _checked_timing
    from evaluation.harness.sandbox import CandidateError
    from evaluation.harness.timing import TimingReport

    report = TimingReport(measured=True, method="graph", median_s=2e-6, p10_s=1.9e-6, p90_s=2.2e-6,
                          mean_s=2e-6, rse=float("inf"), n=20, kernels_per_forward=1.0,
                          event_median_s=5e-6, l2_flush_bytes=1 << 28, persisting_l2_reset=True)
    assert _checked_timing(report.to_dict())["median_s"] == 2e-6
    for forged in ({"measured": True, "median_s": "fast"}, {"measured": True, "median_s": 0},
                   {"measured": "yes"}, ["not", "a", "dict"]):
        with pytest.raises(CandidateError, match="timing report"):
            _checked_timing(forged)


def _samples_taken(per_sample_s: float, rse: float, spent_before_s: float = 0.0) -> list[int]:
    """The batch sizes measure_forward's loop takes for a forward of `per_sample_s`, with
    the clock advanced by the samples taken (the loop's own arithmetic, no GPU)."""
    settings = TimingSettings()
    elapsed, taken, batch, batches = spent_before_s, 0, settings.min_samples, []
    while True:
        size = next_batch_size(settings, taken, batch, settings.max_seconds - elapsed, per_sample_s)
        if size <= 0:
            break
        batches.append(size)
        taken += size
        elapsed += size * per_sample_s
        if enough_samples(settings, taken, rse, elapsed >= settings.max_seconds):
            break
        batch *= 2
    return batches


def test_a_fast_forward_takes_min_samples_then_doubles_until_the_target_error() -> None:
    assert _samples_taken(10e-6, rse=0.005) == [20]
    assert _samples_taken(10e-6, rse=0.05)[:4] == [20, 40, 80, 160]  # until the cap or max


def test_a_forward_slower_than_the_time_cap_allows_stops_at_the_floor_not_at_min_samples() -> None:
    # A 0.2 s reference (a Python loop over sequences): 20 samples would be 4 s and 17
    # profiler sessions; the cap stops it at min_samples_at_cap.
    batches = _samples_taken(0.2, rse=0.05, spent_before_s=0.6)
    assert sum(batches) == TimingSettings().min_samples_at_cap
    assert batches == [2, 3]  # what fits in the time left, then the rest of the floor at once
    # a forward that used up the cap in its warm-up still gets the floor, in one batch
    assert _samples_taken(0.4, rse=0.05, spent_before_s=2.0) == [5]
