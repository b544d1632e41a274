"""Performance stage (GPU only): device time of the candidate's kernels per forward.

Method (EVALUATION.md, with the H200 measurements that motivate it):
- launch by CUDA-graph replay when the forward is capturable, else eagerly with a
  device-wide synchronize;
- before every sample: reset persisting L2 lines and flush L2 by writing a buffer of at
  least twice its size, with a kernel of our own whose name marks the sample boundary;
- rotate several input sets;
- scored time = first kernel start to last kernel end between two flushes, from the
  profiler's device records; event-timed wall time is reported beside it;
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


@dataclass(frozen=True)
class TimingSettings:
    max_seconds: float = 1.0
    target_rse: float = 0.01
    min_samples: int = 20
    max_samples: int = 2000
    allow_graph: bool = True
    # "read" leaves L2 full of clean lines, as ncu's --cache-control all does; "write"
    # leaves dirty lines the candidate must write back first: on an H200 that added 3-4 us
    # to every memory-bound kernel (benchmarks/ncu_compare.py, docs/evaluator.md).
    flush: str = "read"


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
    l2_flush_bytes: int = 0
    persisting_l2_reset: bool = False
    graph_error: str | None = None
    seconds_spent: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class CudaContextCorrupted(RuntimeError):
    """A failed capture or a sticky error left this process's CUDA context unusable."""


def prepare_timing() -> None:
    """Compile the flush kernels and start the profiler once, without launching a kernel."""
    dummy = torch.empty(_L2Flusher.BLOCK, dtype=torch.int32, device="cuda")
    _atrex_l2_flush.warmup(dummy, dummy.numel(), 1, BLOCK=_L2Flusher.BLOCK, grid=(1,))
    _atrex_l2_flush_read.warmup(dummy, dummy, dummy.numel(), BLOCK=_L2Flusher.BLOCK, grid=(1,))
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities):
        pass


def not_measured(reason: str) -> TimingReport:
    return TimingReport(measured=False, reason=reason)


def measure_forward(
    forward: Callable[[Mapping[str, torch.Tensor]], object],
    input_sets: Sequence[Mapping[str, torch.Tensor]],
    settings: TimingSettings,
) -> TimingReport:
    started = time.perf_counter()
    flush = _L2Flusher(settings.flush)
    reset_persisting = _persisting_l2_resetter()
    launch, method, graph_error = _prepare_launch(forward, input_sets, settings.allow_graph)

    def one_sample(i: int, start: torch.cuda.Event, end: torch.cuda.Event) -> None:
        if reset_persisting is not None:
            reset_persisting()
        flush()
        start.record()
        launch(i % len(input_sets))
        end.record()
        if method == "eager":
            torch.cuda.synchronize()

    per_sample_s = _estimate_sample_seconds(one_sample)
    device_times: list[float] = []
    event_times: list[float] = []
    kernel_counts: list[int] = []
    # Batches start small and double: a long compute-bound kernel reaches the target
    # error in a few dozen samples, and fewer back-to-back samples keep the GPU out of
    # its power limit (seen on an H200: SM clock 1980 -> ~1300 MHz under sustained GEMMs).
    batch = settings.min_samples
    while True:
        remaining = settings.max_seconds - (time.perf_counter() - started)
        batch = int(min(batch, max(remaining / per_sample_s, 1),
                        settings.max_samples - len(device_times)))
        if batch <= 0:
            break
        times, counts, events = _profiled_batch(one_sample, batch, len(device_times), flush.marker)
        device_times += times
        kernel_counts += counts
        event_times += events
        rse = _relative_standard_error(device_times)
        out_of_time = time.perf_counter() - started >= settings.max_seconds
        if len(device_times) >= settings.min_samples and (rse < settings.target_rse or out_of_time):
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
        l2_flush_bytes=flush.nbytes,
        persisting_l2_reset=reset_persisting is not None,
        graph_error=graph_error,
        seconds_spent=time.perf_counter() - started,
    )


def _prepare_launch(
    forward: Callable[[Mapping[str, torch.Tensor]], object],
    input_sets: Sequence[Mapping[str, torch.Tensor]],
    allow_graph: bool,
) -> tuple[Callable[[int], None], str, str | None]:
    for inputs in input_sets:  # warm-up: compile and autotune outside capture
        forward(inputs)
    torch.cuda.synchronize()
    if allow_graph:
        try:
            graphs = _capture_graphs(forward, input_sets)
        except RuntimeError as exc:
            _check_context_usable(exc)
            graph_error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        else:
            return (lambda i: graphs[i].replay()), "graph", None
    else:
        graph_error = "graph capture disabled for this shape"

    def eager(i: int) -> None:
        forward(input_sets[i])

    return eager, "eager", graph_error


def _capture_graphs(
    forward: Callable[[Mapping[str, torch.Tensor]], object],
    input_sets: Sequence[Mapping[str, torch.Tensor]],
) -> list[torch.cuda.CUDAGraph]:
    graphs = []
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        forward(input_sets[0])  # a side-stream warm-up, as torch.cuda.graphs recommends
    torch.cuda.current_stream().wait_stream(stream)
    for inputs in input_sets:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            forward(inputs)
        graphs.append(graph)
    torch.cuda.synchronize()
    return graphs


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
) -> tuple[list[float], list[int], list[float]]:
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(count)]
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for i, (start, end) in enumerate(events):
            one_sample(offset + i, start, end)
        torch.cuda.synchronize()
    records = device_records(prof)
    times, counts = forward_spans(records, marker)
    event_times = [start.elapsed_time(end) * 1e-3 for start, end in events]
    return times, counts, event_times


def device_records(prof: Any) -> list[tuple[str, int, int]]:
    """(name, start_ns, end_ns) of every device activity: kernels, memcpy, memset."""
    records = []
    for event in prof.profiler.kineto_results.events():
        if event.device_type() == DeviceType.CUDA:
            start = event.start_ns()
            records.append((event.name(), start, start + event.duration_ns()))
    records.sort(key=lambda r: r[1])
    return records


def forward_spans(records: Sequence[tuple[str, int, int]], marker: str) -> tuple[list[float], list[int]]:
    """Per sample: first kernel start to last kernel end between two marker kernels."""
    spans: list[float] = []
    counts: list[int] = []
    current: list[tuple[str, int, int]] = []
    seen_marker = False

    def close() -> None:
        if seen_marker and current:
            spans.append((max(r[2] for r in current) - min(r[1] for r in current)) * 1e-9)
            counts.append(len(current))

    for record in records:
        if record[0] == marker:
            close()
            current = []
            seen_marker = True
        else:
            current.append(record)
    close()
    return spans, counts


def _relative_standard_error(values: Sequence[float]) -> float:
    if len(values) < 2:
        return float("inf")
    mean = statistics.fmean(values)
    return statistics.stdev(values) / (len(values) ** 0.5) / mean if mean > 0 else float("inf")


class _L2Flusher:
    """Sweeps a buffer of at least twice the L2 size with our own, recognisable kernel."""

    BLOCK = 4096

    def __init__(self, mode: str) -> None:
        if mode not in ("write", "read"):
            raise ValueError(f"unknown L2 flush mode {mode!r}")
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        self.nbytes = max(2 * l2, MIN_FLUSH_BYTES)
        self.mode = mode
        self.buffer = torch.ones(self.nbytes // 4, dtype=torch.int32, device="cuda")
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
