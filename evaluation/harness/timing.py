"""Performance stage (GPU only): device time of the candidate's kernels per forward.

Method (EVALUATION.md, with the H200 measurements that motivate it):
- launch by CUDA-graph replay when the forward is capturable, else eagerly with a
  device-wide synchronize;
- before every sample: new input contents in place (timed_calls.FreshInputs), then reset
  persisting L2 lines and flush L2 by reading a buffer of at least twice its size with a
  kernel of our own whose name marks the sample's start;
- after every sample: a device-wide synchronize (work the forward left on any stream is
  done), then a one-program kernel of ours that marks the sample's end, then perhaps a
  check of this call's outputs (timed_calls.TimedCallChecks); what runs between an end
  marker and the next start marker (refills, checks) is not the candidate's time;
- rotate several input buffer sets;
- scored time, from the profiler's device records between a sample's two markers: under
  graph replay the span, first kernel start to last kernel end (the replay launches back to
  back, the gaps are the device's own); eagerly the device's busy time, the union of the
  kernels' intervals (on one stream: the sum of kernel times). An eager span also holds the
  host's launch gaps, which the profiler itself stretches (its per-launch bookkeeping): on
  an H200 host-bound eager references spanned up to 1.9x their own wall time without it
  (EVALUATION.md). The span and the event-timed wall time are reported beside it; a marker
  count that disagrees with the sample count (a candidate kernel named like a marker)
  fails the stage;
- stop when the relative standard error of the mean is under the target, or at a time cap.

Runs inside the sandboxed child.
"""

from __future__ import annotations

import contextlib
import ctypes
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
import triton
import triton.language as tl
from torch.autograd import DeviceType  # type: ignore[attr-defined]

from .timed_calls import TimedCall

MIN_FLUSH_BYTES = 256 * 1024 * 1024


@triton.jit
def _atrex_l2_flush(ptr, n, value, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offsets, value, mask=offsets < n)


@triton.jit
def _atrex_l2_flush_read(ptr, sums, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(ptr + offsets, mask=offsets < n, other=0)
    tl.store(sums + tl.program_id(0), tl.sum(values, axis=0))


@triton.jit
def _atrex_sample_end(ptr):  # type: ignore[no-untyped-def]
    tl.store(ptr, tl.load(ptr) + 1)


END_MARKER = "_atrex_sample_end"


@dataclass(frozen=True)
class TimingSettings:
    max_seconds: float = 1.0
    target_rse: float = 0.01
    min_samples: int = 20
    # A forward so slow that min_samples would overrun the time cap many times over (a
    # reference looping over sequences in Python takes 0.1-0.2 s) stops at the cap once it
    # has this many samples: 20 samples of 0.2 s plus a profiler session for each sample
    # taken after the cap cost 6 s a shape, and their spread is small anyway (rse reported).
    min_samples_at_cap: int = 5
    max_samples: int = 2000
    allow_graph: bool = True
    # "read" leaves L2 full of clean lines, as ncu's --cache-control all does; "write"
    # leaves dirty lines the candidate must write back first: on an H200 that added 3-4 us
    # to every memory-bound kernel (benchmarks/ncu_compare.py, docs/evaluator.md). "none"
    # sweeps nothing (a one-program marker kernel still opens each sample): what a warm L2
    # gives, for the measurement report's flush on/off comparison, never for scoring.
    flush: str = "read"
    # Spot checks of timed calls (timed_calls.TimedCallChecks): each call is picked with this
    # probability after it returned, at most max_checks per shape, the last one if none was.
    check_probability: float = 0.125
    max_checks: int = 3
    # Without a GPU nothing is timed, but this many calls still run the same way (fresh
    # contents in place, checked), so the caching defences are exercised on a CPU too.
    unmeasured_calls: int = 3


@dataclass
class TimingReport:
    measured: bool
    reason: str | None = None
    method: str | None = None  # "graph" or "eager"
    median_s: float | None = None
    p10_s: float | None = None
    p90_s: float | None = None
    mean_s: float | None = None
    rse: float | None = None
    n: int = 0
    kernels_per_forward: float | None = None
    event_median_s: float | None = None
    # What median_s is: "span" (graph replay) or "busy" (eager); the span's median beside it.
    scored_as: str | None = None
    span_median_s: float | None = None
    l2_flush_bytes: int = 0
    persisting_l2_reset: bool = False
    graph_error: str | None = None
    seconds_spent: float = 0.0
    fresh_inputs: bool | None = None  # new contents before every call (else restored ones)
    checked_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class CudaContextCorrupted(RuntimeError):
    """A failed capture or a sticky error left this process's CUDA context unusable."""


class MarkersForged(RuntimeError):
    """The device records hold more sample markers than the harness launched."""


def prepare_timing() -> None:
    """Compile the flush kernels and start the profiler once, without launching a kernel."""
    dummy = torch.empty(_L2Flusher.BLOCK, dtype=torch.int32, device="cuda")
    _atrex_l2_flush.warmup(dummy, dummy.numel(), 1, BLOCK=_L2Flusher.BLOCK, grid=(1,))
    _atrex_l2_flush_read.warmup(dummy, dummy, dummy.numel(), BLOCK=_L2Flusher.BLOCK, grid=(1,))
    _atrex_sample_end.warmup(dummy, grid=(1,))
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities):
        pass


def not_measured(reason: str) -> TimingReport:
    return TimingReport(measured=False, reason=reason)


def measure_forward(
    forward: Callable[[Mapping[str, torch.Tensor]], object],
    input_sets: Sequence[Mapping[str, torch.Tensor]],
    settings: TimingSettings,
    refill: Callable[[int], tuple[int, Mapping[str, torch.Tensor]]] | None = None,
    after_call: Callable[[TimedCall], None] | None = None,
) -> TimingReport:
    """Time the forward. `refill(i)` gives input set i new contents before a sample and
    returns their seed and a copy; `after_call` sees every call (for the spot checks)."""
    started = time.perf_counter()
    flush = _L2Flusher(settings.flush)
    reset_persisting = _persisting_l2_resetter()
    launch, method, graph_error = _prepare_launch(forward, input_sets, settings.allow_graph)
    end_flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    calls = 0

    def one_sample(i: int, start: torch.cuda.Event, end: torch.cuda.Event) -> None:
        nonlocal calls
        index = i % len(input_sets)
        seed, before = refill(index) if refill is not None else (0, {})
        if reset_persisting is not None:
            reset_persisting()
        flush()
        start.record()
        result = launch(index)
        end.record()
        torch.cuda.synchronize()  # whatever the forward left running, on any stream, ends here
        _atrex_sample_end[(1,)](end_flag)
        if after_call is not None:
            after_call(TimedCall(calls, seed, input_sets[index], before, result))
        calls += 1

    per_sample_s = _estimate_sample_seconds(one_sample)
    device_times: list[float] = []
    span_times: list[float] = []
    event_times: list[float] = []
    kernel_counts: list[int] = []
    # Batches start small and double: a long compute-bound kernel reaches the target
    # error in a few dozen samples, and fewer back-to-back samples keep the GPU out of
    # its power limit (seen on an H200: SM clock 1980 -> ~1300 MHz under sustained GEMMs).
    batch = settings.min_samples
    while True:
        remaining = settings.max_seconds - (time.perf_counter() - started)
        batch = next_batch_size(settings, len(device_times), batch, remaining, per_sample_s)
        if batch <= 0:
            break
        spans, busy, counts, events = _profiled_batch(one_sample, batch, len(device_times),
                                                      flush.marker)
        device_times += busy if method == "eager" else spans
        span_times += spans
        kernel_counts += counts
        event_times += events
        out_of_time = time.perf_counter() - started >= settings.max_seconds
        if enough_samples(settings, len(device_times), _relative_standard_error(device_times),
                          out_of_time):
            break
        batch *= 2
    if not device_times:
        return TimingReport(measured=False, reason="no kernel records captured", method=method)
    quantiles = statistics.quantiles(device_times, n=10, method="inclusive") \
        if len(device_times) > 1 else [device_times[0]] * 9
    return TimingReport(
        measured=True,
        method=method,
        median_s=statistics.median(device_times),
        p10_s=quantiles[0],
        p90_s=quantiles[-1],
        mean_s=statistics.fmean(device_times),
        rse=_relative_standard_error(device_times),
        n=len(device_times),
        kernels_per_forward=statistics.fmean(kernel_counts),
        event_median_s=statistics.median(event_times),
        scored_as="busy" if method == "eager" else "span",
        span_median_s=statistics.median(span_times),
        l2_flush_bytes=flush.nbytes,
        persisting_l2_reset=reset_persisting is not None,
        graph_error=graph_error,
        seconds_spent=time.perf_counter() - started,
    )


def next_batch_size(settings: TimingSettings, taken: int, batch: int, remaining_s: float,
                    per_sample_s: float) -> int:
    """Samples in the next profiled batch: this batch's size while time remains (as many as
    fit in it, at least one), then only what the floor at the time cap still needs."""
    room = settings.max_samples - taken
    if remaining_s > 0:
        return int(min(batch, max(remaining_s / per_sample_s, 1), room))
    return min(min(settings.min_samples, settings.min_samples_at_cap) - taken, room)


def enough_samples(settings: TimingSettings, taken: int, rse: float, out_of_time: bool) -> bool:
    """Stop at the target error after min_samples, or at the time cap after its floor."""
    if out_of_time:
        return taken >= min(settings.min_samples, settings.min_samples_at_cap)
    return taken >= settings.min_samples and rse < settings.target_rse


def _prepare_launch(
    forward: Callable[[Mapping[str, torch.Tensor]], object],
    input_sets: Sequence[Mapping[str, torch.Tensor]],
    allow_graph: bool,
) -> tuple[Callable[[int], object], str, str | None]:
    """A launcher for input set i that returns that call's outputs, and how it launches."""
    for inputs in input_sets:  # warm-up: compile and autotune outside capture
        forward(inputs)
    torch.cuda.synchronize()
    if allow_graph:
        try:
            graphs, outputs = _capture_graphs(forward, input_sets)
        except RuntimeError as exc:
            _check_context_usable(exc)
            graph_error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        else:
            def replay(i: int) -> object:
                graphs[i].replay()
                return outputs[i]  # the graph writes its outputs to the captured tensors

            return replay, "graph", None
    else:
        graph_error = "graph capture disabled for this shape"

    def eager(i: int) -> object:
        return forward(input_sets[i])

    return eager, "eager", graph_error


def _capture_graphs(
    forward: Callable[[Mapping[str, torch.Tensor]], object],
    input_sets: Sequence[Mapping[str, torch.Tensor]],
) -> tuple[list[torch.cuda.CUDAGraph], list[object]]:
    graphs, outputs = [], []
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        forward(input_sets[0])  # a side-stream warm-up, as torch.cuda.graphs recommends
    torch.cuda.current_stream().wait_stream(stream)
    for inputs in input_sets:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs.append(forward(inputs))
        graphs.append(graph)
    torch.cuda.synchronize()
    return graphs, outputs


def _check_context_usable(cause: BaseException) -> None:
    try:
        torch.cuda.synchronize()
        probe = torch.randn(16, device="cuda")
        float(probe.sum())
    except RuntimeError as exc:
        raise CudaContextCorrupted(f"CUDA context unusable after failed graph capture: {cause}") \
            from exc


def _estimate_sample_seconds(one_sample: Callable[[int, Any, Any], None]) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(3):
        one_sample(i, start, end)
    torch.cuda.synchronize()
    return max((time.perf_counter() - t0) / 3, 1e-6)


def _profiled_batch(
    one_sample: Callable[[int, Any, Any], None], count: int, offset: int, marker: str
) -> tuple[list[float], list[float], list[int], list[float]]:
    """Per sample: span, busy time, kernel count and event-timed wall time."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(count)]
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for i, (start, end) in enumerate(events):
            one_sample(offset + i, start, end)
        torch.cuda.synchronize()
    records = device_records(prof)
    spans, busy, counts = forward_spans(records, marker)
    event_times = [start.elapsed_time(end) * 1e-3 for start, end in events]
    return spans, busy, counts, event_times


def device_records(prof: Any) -> list[tuple[str, int, int]]:
    """(name, start_ns, end_ns) of every device activity: kernels, memcpy, memset."""
    records = []
    for event in prof.profiler.kineto_results.events():
        if event.device_type() == DeviceType.CUDA:
            start = event.start_ns()
            records.append((event.name(), start, start + event.duration_ns()))
    records.sort(key=lambda r: r[1])
    return records


def forward_spans(records: Sequence[tuple[str, int, int]], marker: str,
                  end_marker: str = END_MARKER) -> tuple[list[float], list[float], list[int]]:
    """Per sample between its start marker (the L2 sweep) and its end marker: the span (first
    kernel start to last kernel end), the busy time (the union of the records' intervals:
    overlapping kernels of several streams count once, gaps not at all) and the record
    count. Records outside a sample (refills, checks) are not counted.

    Raises MarkersForged when markers do not alternate start, end: a kernel of the
    candidate named like one of ours would otherwise cut its own work out of the span.
    """
    spans: list[float] = []
    busy: list[float] = []
    counts: list[int] = []
    current: list[tuple[str, int, int]] | None = None  # None: outside a sample
    for record in records:
        name = record[0]
        if name == marker:
            if current is not None:
                raise MarkersForged(f"two '{marker}' records without an end marker between")
            current = []
        elif name == end_marker:
            if current is None:
                raise MarkersForged(f"an '{end_marker}' record outside a sample")
            if current:
                spans.append((max(r[2] for r in current) - min(r[1] for r in current)) * 1e-9)
                busy.append(busy_ns(current) * 1e-9)
                counts.append(len(current))
            current = None
        elif current is not None:
            current.append(record)
    if current is not None:
        raise MarkersForged(f"a sample's '{marker}' record has no end marker")
    return spans, busy, counts


def busy_ns(records: Sequence[tuple[str, int, int]]) -> int:
    """Length of the union of the records' [start, end) intervals."""
    total, covered_to = 0, None
    for _, start, end in sorted(records, key=lambda r: r[1]):
        if covered_to is None or start >= covered_to:
            total += end - start
            covered_to = end
        elif end > covered_to:
            total += end - covered_to
            covered_to = end
    return total


def _relative_standard_error(values: Sequence[float]) -> float:
    if len(values) < 2:
        return float("inf")
    mean = statistics.fmean(values)
    return statistics.stdev(values) / (len(values) ** 0.5) / mean if mean > 0 else float("inf")


class _L2Flusher:
    """Sweeps a buffer of at least twice the L2 size with our own, recognisable kernel."""

    BLOCK = 4096

    def __init__(self, mode: str) -> None:
        if mode not in ("write", "read", "none"):
            raise ValueError(f"unknown L2 flush mode {mode!r}")
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        # "none": a one-block buffer, so the marker kernel runs one program and touches
        # nothing the candidate's data could be evicted by
        self.nbytes = 0 if mode == "none" else max(2 * l2, MIN_FLUSH_BYTES)
        self.mode = mode
        self.buffer = torch.ones(max(self.nbytes // 4, 1), dtype=torch.int32, device="cuda")
        self.grid = (triton.cdiv(self.buffer.numel(), self.BLOCK),)
        self.sums = torch.empty(self.grid[0], dtype=torch.int32, device="cuda")
        self.marker = "_atrex_l2_flush" if mode == "write" else "_atrex_l2_flush_read"
        self.counter = 0

    def __call__(self) -> None:
        n = self.buffer.numel()
        if self.mode == "write":
            self.counter += 1
            _atrex_l2_flush[self.grid](self.buffer, n, self.counter, BLOCK=self.BLOCK)
        else:
            _atrex_l2_flush_read[self.grid](self.buffer, self.sums, n, BLOCK=self.BLOCK)


def _persisting_l2_resetter() -> Callable[[], None] | None:
    """cudaCtxResetPersistingL2Cache from the CUDA runtime torch loaded, if we can find it."""
    library = None
    with contextlib.suppress(OSError), open("/proc/self/maps") as maps:
        for line in maps:
            if "libcudart.so" in line:
                library = line.split()[-1]
                break
    if library is None:
        return None
    try:
        function = ctypes.CDLL(library).cudaCtxResetPersistingL2Cache
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int

    def reset() -> None:
        function()

    return reset
