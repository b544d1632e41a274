"""Performance stage (GPU only): the device span of one forward, in every launch mode.

The scored time (EVALUATION.md, point 4) is one quantity whichever way the forward is
launched: the device span of one forward, from the start of its first device activity
(kernel, memcpy, memset, on any stream) to the end of its last, with L2 flushed before it.
Under CUDA-graph replay the gaps between kernels are the device's own; eagerly they also
hold the host's launch gaps, and they count: a production stream pays them unless the
forward is captured. Busy time (the union of the kernels' intervals) is reported beside
it and never scored: scoring eager forwards by it made refusing capture pay, and scored a
host-bound reference at a ninth of its span (H200, 2026-12-01).

Method, per sample: new input contents in place (timed_calls.FreshInputs), persisting L2
reset, an L2 sweep of at least twice its size by a kernel of ours whose name opens the
sample, a device-wide synchronize (the forward starts on an idle device: our 60 us sweep
must not absorb the host's first launches), a CUDA event, the forward, a CUDA event, a
one-program kernel of ours marking that the forward returned, a device-wide synchronize,
a one-program kernel closing the sample, then perhaps a spot check of the call
(timed_calls.TimedCallChecks). What runs outside a sample's markers (refills, checks) is
not the candidate's time.

Two passes over such samples:
- profiled (CUPTI device records through torch.profiler): per sample the span, the busy
  time, the kernels by name (the parent checks them against the observed calls'), and
  whether all of the forward's work ran between the two CUDA events;
- plain (no profiler): the CUDA events alone, the end-to-end wall time of the call.
Graph replay is one launch, which the profiler does not stretch: its profiled span is the
scored time, the plain pass gives the wall time. Eagerly the profiler's per-launch
bookkeeping stretches the host's gaps (host-bound references spanned up to 1.9x their
wall time under it), so the plain pass is the scored one: each sample's event time,
bounded below by the profiled busy time (median; no span is shorter; see
`bounded_event_spans`). Where the profiled samples show work the events cannot see (on
another stream before the sweep ended, or after the forward returned), the profiled span
is scored.

Stop when the median's error (its bootstrap spread, TimingSettings.stop_rule) is under the
target or within one step of the timer after min_samples, or at the time cap once the floor
is reached.

Runs inside the sandboxed child.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import triton
import triton.language as tl

from .confidence import bootstrap_spread
from .graph_capture import prepare_launch
from .steps import Steps
from .timed_calls import Flow, TimedCall, UncheckedFlow
from .timing_host import detach_profiler, persisting_l2_resetter, pinned_thread
from .timing_records import (
    END_MARKER,
    ForwardWindow,
    GapAllowance,
    MarkersForged,
    _kernel_counts,
    check_gaps,
    device_records,
    forward_windows,
)

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
def _atrex_forward_returned(ptr):  # type: ignore[no-untyped-def]
    tl.store(ptr, tl.load(ptr) + 1)


@triton.jit
def _atrex_sample_end(ptr):  # type: ignore[no-untyped-def]
    tl.store(ptr, tl.load(ptr) + 1)


# Under graph replay the whole guard runs before every this-many calls, its cheap part
# (hooks, threads, processes) before each (timed_calls.TimedCallFlow.check_every).
GRAPH_THOROUGH_EVERY = 16


@dataclass(frozen=True)
class TimingSettings:
    max_seconds: float = 1.0
    target_rse: float = 0.01
    # What target_rse bounds: "median", the relative standard error of the scored statistic,
    # the median (its bootstrap spread, confidence.bootstrap_spread); "mean", the samples'
    # relative standard error of the mean, the rule before 2026-12-03: a few slow samples
    # (a sweep's tail, a clock step) kept graph-replayed shapes sampling to 65-305 where
    # their median had long settled (docs/measurement.md).
    stop_rule: str = "median"
    # The step of the profiler's device timestamps (CUPTI on Hopper: 32 ns; 48-51 of 56
    # rms_norm medians on the H200 were whole multiples of it, the rest off by a nanosecond of
    # conversion): a median known to within one step is as known as samples can make it.
    timer_step_s: float = 32e-9
    min_samples: int = 20
    # A forward so slow that min_samples would overrun the time cap many times over (a
    # reference looping over sequences in Python takes 0.1-0.2 s) stops at the cap once it
    # has this many samples: 20 samples of 0.2 s plus a profiler session for each sample
    # taken after the cap cost 6 s a shape, and their spread is small anyway (rse reported).
    min_samples_at_cap: int = 5
    max_samples: int = 2000
    # The pass that is not scored (the plain wall time under graph replay; the profiled
    # records of an eager forward, whose medians bound its scored samples and whose kernel
    # names the parent checks) takes this many samples, or the smaller number when that
    # many would take half the time cap.
    side_samples: int = 5
    side_samples_at_cap: int = 3
    allow_graph: bool = True
    # Where an eager forward starts (issue 43, docs/measurement.md; a graph replay always
    # starts on an idle device): "queued", its first
    # launches queue behind the L2 sweep as a serving loop's queue behind the last forward,
    # so the host's latency is paid only where the host is slower than the device; "idle",
    # on an idle device after a synchronize, every host latency exposed (the rule before
    # 2026-12-04, for the measurement report's comparison).
    start: str = "queued"
    # The timing thread pinned to the core it runs on while it samples (an unpinned
    # host-bound forward moved 1.65x from round to round on the H200; pinned, within 1%).
    pin_thread: bool = True
    # Before the unprofiled samples an eager forward is scored by, detach the profiler's
    # CUPTI callbacks, which stay subscribed after a session and tax every later launch.
    detach_profiler: bool = True
    # A captured graph is trusted once one replay reproduced the eager call within these
    # (the operator's tolerance; graph_capture.graph_mismatch)
    capture_atol: float = 1e-2
    capture_rtol: float = 5e-2
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


SPAN_BY_PROFILER, SPAN_BY_EVENTS = "profiler", "events"  # TimingReport.span_measured_by
WALL_FIELD = "wall_median_s"  # TimingReport's wall time, by its name on the wire (readers')


@dataclass
class TimingReport:
    measured: bool
    reason: str | None = None
    method: str | None = None  # "graph" or "eager"
    median_s: float | None = None  # the scored time: the device span of one forward
    p10_s: float | None = None
    p90_s: float | None = None
    mean_s: float | None = None
    rse: float | None = None
    n: int = 0
    kernels_per_forward: float | None = None
    # The end-to-end wall time of one call: CUDA events before the call and after it
    # returned, no profiler running (what the host adds on top of the span).
    wall_median_s: float | None = None
    busy_median_s: float | None = None  # the union of the kernels' intervals: never scored
    span_median_s: float | None = None  # the profiled samples' span
    scored_as: str | None = None  # "span" (results before 2026-12-01 may say "busy")
    # How the scored span was measured: "profiler" (device records: graph replay, or an
    # eager forward with work the events cannot see) or "events" (eager: the plain pass's
    # CUDA events, bounded below by the profiled busy time)
    span_measured_by: str | None = None
    profiled_samples: int = 0
    # Every kernel, memcpy and memset the profiled timed calls ran, by name: the parent
    # checks them against the calls it observed (on a CPU: the DSL launches by name).
    timed_kernel_names: list[str] = field(default_factory=list)
    l2_flush_bytes: int = 0
    persisting_l2_reset: bool = False
    graph_error: str | None = None
    seconds_spent: float = 0.0
    fresh_inputs: bool | None = None  # new contents before every call (else restored ones)
    checked_calls: int = 0
    timed_calls: int = 0  # calls whose contents the parent gave (every sample, both passes)
    start: str | None = None  # TimingSettings.start
    profiler_detached: bool = False  # CUPTI detached before the unprofiled samples
    # Profiled samples whose gaps (the device's activity between two samples) held only the
    # harness's own work: every profiled sample (check_gaps fails the shape otherwise).
    accounted_samples: int = 0
    # The scored samples in the order taken (seconds): the trusted side checks their median is
    # median_s and derives the median's standard error from them (confidence.py).
    samples_s: list[float] = field(default_factory=list)
    stop_rule: str | None = None  # what stopped the sampling (TimingSettings.stop_rule)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def prepare_timing() -> None:
    """Compile the harness's kernels and start the profiler once, without launching a kernel."""
    dummy = torch.empty(L2Flusher.BLOCK, dtype=torch.int32, device="cuda")
    _atrex_l2_flush.warmup(dummy, dummy.numel(), 1, BLOCK=L2Flusher.BLOCK, grid=(1,))
    _atrex_l2_flush_read.warmup(dummy, dummy, dummy.numel(), BLOCK=L2Flusher.BLOCK, grid=(1,))
    _atrex_forward_returned.warmup(dummy, grid=(1,))
    _atrex_sample_end.warmup(dummy, grid=(1,))
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities):
        pass


def not_measured(reason: str) -> TimingReport:
    return TimingReport(measured=False, reason=reason)


def record_gap_allowance(run: Callable[[Callable[[], None]], None]) -> GapAllowance:
    """Profile the harness's gap work (timed_calls.rehearse_gap) on this device."""
    flags = torch.zeros(2, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()

    def divide() -> None:
        torch.cuda.synchronize()
        _atrex_sample_end[(1,)](flags[1:])

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run(divide)
        torch.cuda.synchronize()
    records = device_records(prof)
    cut = next((i for i, r in enumerate(records) if r[0] == END_MARKER), len(records))
    return GapAllowance(_kernel_counts(records[:cut]), _kernel_counts(records[cut + 1:]))


def measure_forward(
    forward: Callable[[Mapping[str, torch.Tensor]], object],
    input_sets: Sequence[Mapping[str, torch.Tensor]],
    settings: TimingSettings,
    flow: Flow | None = None,
    steps: Steps | None = None,
    allowance: GapAllowance | None = None,
) -> TimingReport:
    """Time the forward. `flow` does what happens between two calls (timed_calls: new
    contents before each, the parent's checks after); `steps` receives where the seconds
    went (warm-up, capture, samples, profiler); with `allowance`, every profiled sample's
    gap is accounted for (check_gaps)."""
    started = time.perf_counter()
    steps = steps if steps is not None else Steps()
    prepared = prepare_launch(forward, input_sets, settings.allow_graph, steps,
                              settings.capture_atol, settings.capture_rtol)
    launch, method, graph_error, call_s = (prepared.run, prepared.method,
                                           prepared.graph_error, prepared.call_s)
    if settings.start not in ("queued", "idle"):
        raise ValueError(f"unknown start {settings.start!r}")
    # A graph's span starts at its first kernel either way and the host adds nothing inside
    # it: it starts on an idle device, as its scored times always have (and ncu's do).
    sampler = Sampler(launch, input_sets, L2Flusher(settings.flush),
                       persisting_l2_resetter(), flow, steps, allowance,
                       start_idle=settings.start == "idle" or method == "graph")
    if method == "graph":  # no code of the candidate's runs between replays (check_every)
        sampler.flow.check_every(GRAPH_THOROUGH_EVERY)
    with pinned_thread(settings.pin_thread):
        report = _sample_until_known(sampler, method, settings, call_s, started)
    report.graph_error = graph_error
    report.stop_rule = settings.stop_rule
    report.accounted_samples = sampler.accounted
    report.start = settings.start
    return report


def _sample_until_known(sampler: Sampler, method: str, settings: TimingSettings,
                        call_s: float, started: float) -> TimingReport:
    """The profiled and plain batches (module docstring) until the median is known."""
    side = settings.side_samples if call_s * settings.side_samples < settings.max_seconds / 2 \
        else settings.side_samples_at_cap
    batch_started = time.perf_counter()
    # These samples give the kernels' names the parent checks and an eager forward's floor
    # (busy time): one of them, picked after the calls returned, is checked, so a
    # forward that behaves otherwise while profiled in the timing stage is seen doing it.
    first = sampler.profiled(side, check_one=True)
    per_sample_s = max((time.perf_counter() - batch_started) / side, 1e-6)
    windows = [w for w in first.windows if w.count]
    if not windows:
        return TimingReport(measured=False, reason="no kernel records captured", method=method)
    by_events = method == "eager" and events_see_everything(windows)
    if by_events and settings.detach_profiler:
        sampler.profiler_detached = detach_profiler()
    walls = [] if by_events else sampler.plain(side).walls
    scored = [] if by_events else scored_samples(method, windows, walls)[0]
    batch = settings.min_samples
    while True:
        remaining = settings.max_seconds - (time.perf_counter() - started)
        size = next_batch_size(settings, len(scored), batch, remaining, per_sample_s)
        if size <= 0:
            break
        if by_events:  # the profiled windows stay those of the first batch: the floor
            walls += sampler.plain(size).walls
        else:
            windows += [w for w in sampler.profiled(size).windows if w.count]
        scored, _ = scored_samples(method, windows, walls)
        out_of_time = time.perf_counter() - started >= settings.max_seconds
        if enough_samples(settings, len(scored), sampling_error(settings, scored), out_of_time):
            break
        batch *= 2
    if not scored:
        return TimingReport(measured=False, reason="no kernel records captured", method=method)
    return _report(method, windows, walls, sampler, None, time.perf_counter() - started)


def _report(method: str, windows: list[ForwardWindow], walls: list[float],
            sampler: Sampler, graph_error: str | None, seconds: float) -> TimingReport:
    scored, measured_by = scored_samples(method, windows, walls)
    quantiles = statistics.quantiles(scored, n=10, method="inclusive") \
        if len(scored) > 1 else [scored[0]] * 9
    return TimingReport(
        measured=True,
        method=method,
        median_s=statistics.median(scored),
        p10_s=quantiles[0],
        p90_s=quantiles[-1],
        mean_s=statistics.fmean(scored),
        rse=_relative_standard_error(scored),
        n=len(scored),
        kernels_per_forward=statistics.fmean(w.count for w in windows),
        wall_median_s=statistics.median(walls) if walls else None,
        busy_median_s=statistics.median(w.busy_ns for w in windows) * 1e-9,
        span_median_s=statistics.median(w.span_ns for w in windows) * 1e-9,
        scored_as="span",
        span_measured_by=measured_by,
        profiled_samples=len(windows),
        timed_kernel_names=sorted(set().union(*(w.names for w in windows))),
        l2_flush_bytes=sampler.flush.nbytes,
        persisting_l2_reset=sampler.reset_persisting is not None,
        profiler_detached=sampler.profiler_detached,
        graph_error=graph_error,
        seconds_spent=seconds,
        samples_s=list(scored),
    )


def scored_samples(method: str, windows: Sequence[ForwardWindow],
                   walls: Sequence[float]) -> tuple[list[float], str]:
    """The scored samples (seconds) and how they were measured, from the profiled windows
    and the plain pass's event times: the device span either way (the module docstring)."""
    timed = [w for w in windows if w.count]
    if method == "eager" and timed and walls and events_see_everything(timed):
        return bounded_event_spans(walls, busy_median(timed)), SPAN_BY_EVENTS
    return [w.span_ns * 1e-9 for w in timed], SPAN_BY_PROFILER


def events_see_everything(windows: Sequence[ForwardWindow]) -> bool:
    """Whether CUDA events around the call saw all of the forward's work in every sample."""
    return not any(w.escapes_events for w in windows)


def busy_median(windows: Sequence[ForwardWindow]) -> float:
    """The profiled samples' median busy time, in seconds."""
    return statistics.median(w.busy_ns for w in windows) * 1e-9


def bounded_event_spans(walls: Sequence[float], low: float) -> list[float]:
    """An eager forward's scored samples: each uninstrumented call's event time, never below
    the kernels' busy time (no span is shorter; a forward that ran less while unprofiled
    gains nothing below what it ran while profiled).

    There is no upper bound. The profiled span used to be one, and it came from other calls
    at another moment: a host-bound forward's pace drifts by up to 15% over seconds
    (benchmarks/host_bound_probe.py, H200), so the bound lowered 43 of the public
    baseline's 163 eager shapes below their own event time, by up to 42%, and four of
    eleven host-bound references 7-12% below their wall time (docs/measurement.md). The
    event time also holds the host's work between the first event and the first launch;
    a production stream pays that too. A bound above could only lower a score, never
    catch a forward that behaves otherwise unprofiled: that is the busy-time floor's job,
    and the profiled sample checked in every timing stage's (`Sampler.profiled`)."""
    return [max(wall, low) for wall in walls]


def next_batch_size(settings: TimingSettings, taken: int, batch: int, remaining_s: float,
                    per_sample_s: float) -> int:
    """Samples in the next batch: this batch's size while time remains (as many as fit in
    it, at least one), then only what the floor at the time cap still needs."""
    room = settings.max_samples - taken
    if remaining_s > 0:
        return int(min(batch, max(remaining_s / per_sample_s, 1), room))
    return min(min(settings.min_samples, settings.min_samples_at_cap) - taken, room)


def sampling_error(settings: TimingSettings, scored: Sequence[float]) -> float:
    """The relative error the stop rule bounds (TimingSettings.stop_rule)."""
    if settings.stop_rule == "mean":
        return _relative_standard_error(scored)
    if settings.stop_rule != "median":
        raise ValueError(f"unknown stop rule {settings.stop_rule!r}")
    middle = statistics.median(scored) if scored else 0.0
    if middle <= 0:
        return float("inf")
    spread = bootstrap_spread(scored)
    # Within one step of the timer the median is as known as samples can make it: half the
    # samples on each side of a tick boundary keep it flipping however many are taken (on
    # the H200 such shapes of 1.2-16 us sampled to 145-744, a fifth of rms_norm's evaluation
    # time); confidence.py counts that error in. The step is the timer's, not the smallest
    # gap between two samples: one sample a nanosecond off the tick would make that 1 ns.
    return 0.0 if spread <= settings.timer_step_s else spread / middle


def enough_samples(settings: TimingSettings, taken: int, rse: float, out_of_time: bool) -> bool:
    """Stop at the target error after min_samples, or at the time cap after its floor."""
    if out_of_time:
        return taken >= min(settings.min_samples, settings.min_samples_at_cap)
    return taken >= settings.min_samples and rse < settings.target_rse


@dataclass
class Batch:
    windows: list[ForwardWindow]  # empty for a plain batch
    walls: list[float]  # per sample: CUDA event time around the call, seconds


class Sampler:
    """Runs samples (see the module docstring), profiled or plain; counts the calls.

    Profiled samples are accounted for on the device: every activity between two samples
    must be the harness's own (`check_gaps` against the trusted side's GapAllowance)."""

    def __init__(self, launch: Callable[[int], object],
                 input_sets: Sequence[Mapping[str, torch.Tensor]], flush: L2Flusher,
                 reset_persisting: Callable[[], None] | None, flow: Flow | None,
                 steps: Steps | None = None, allowance: GapAllowance | None = None,
                 start_idle: bool = False) -> None:
        self.launch, self.input_sets, self.flush = launch, input_sets, flush
        self.start_idle = start_idle
        self.profiler_detached = False
        self.reset_persisting = reset_persisting
        self.flow: Flow = flow if flow is not None else UncheckedFlow()
        self.steps = steps if steps is not None else Steps()
        self.allowance = allowance
        self.calls = 0
        self.accounted = 0  # profiled samples whose gaps were checked
        self._flags = torch.zeros(2, dtype=torch.int32, device="cuda")
        self.flow.watch("Sampler", self, ["launch", "input_sets", "flush", "reset_persisting",
                                          "flow", "steps", "allowance", "start_idle",
                                          "_flags"])
        self.flow.watch("L2Flusher", flush, ["nbytes", "mode", "buffer", "grid", "sums",
                                             "marker"])

    def profiled(self, count: int, check_one: bool = False) -> Batch:
        """`count` profiled samples; with `check_one`, one of them (each in turn with the
        chance that leaves every one equally likely, drawn by the parent after its call) is
        checked. The last call is settled before the profiler stops, so a check's save is
        on the record too."""
        events = _events(count)
        activities = [torch.profiler.ProfilerActivity.CUDA]
        if check_one:
            self.flow.pick_one_of_next(count)
        checks: list[int] = []  # per gap (before each sample, and after the last): saves
        # the session's own cost (start, stop, collecting records) is what this step holds
        # beyond its samples' steps
        with self.steps("timing.profiled_batches"), \
                torch.profiler.profile(activities=activities) as prof:
            for start, end in events:
                saved = self.flow.checks_saved
                self._sample(start, end)
                checks.append(self.flow.checks_saved - saved)
            saved = self.flow.checks_saved
            with self.steps("timing.sample.spot_checks"):
                self.flow.settle()
            checks.append(self.flow.checks_saved - saved)
            torch.cuda.synchronize()
        with self.steps("timing.records_parse"):
            records = device_records(prof)
            windows = forward_windows(records, self.flush.marker)
            if len(windows) != count:
                raise MarkersForged(f"the device records hold {len(windows)} samples' markers "
                                    f"for {count} samples")
            if self.allowance is not None:
                check_gaps(records, self.flush.marker, self.allowance, checks,
                           {n for w in windows for n in w.names})
                self.accounted += count
        return Batch(windows, _elapsed(events))

    def plain(self, count: int) -> Batch:
        events = _events(count)
        with self.steps("timing.plain_batches"):
            for start, end in events:
                self._sample(start, end)
            torch.cuda.synchronize()
        return Batch([], _elapsed(events))

    def _sample(self, start: torch.cuda.Event, end: torch.cuda.Event) -> None:
        index = self.calls % len(self.input_sets)
        steps = self.steps
        with steps("timing.sample.fresh_inputs"):
            seed, before = self.flow.before(index)
        with steps("timing.sample.l2_flush"):
            if self.reset_persisting is not None:
                self.reset_persisting()
            self.flush()
            # Queued (the default): the forward's first launches queue behind the sweep, as
            # a serving loop's queue behind the previous forward; the span starts when its
            # first activity does, so up to the sweep's length (~60 us) of the host's
            # latency to its first launch is hidden, and every gap inside it is the host's
            # or the device's own. Idle: the forward starts on an idle device.
            if self.start_idle:
                torch.cuda.synchronize()
        call_started = time.perf_counter()
        start.record()
        result = self.launch(index)
        end.record()
        _atrex_forward_returned[(1,)](self._flags)
        torch.cuda.synchronize()  # whatever the forward left running, on any stream, ends here
        _atrex_sample_end[(1,)](self._flags[1:])
        steps.add("timing.sample.call", time.perf_counter() - call_started)
        self.flow.after(TimedCall(self.calls, seed, self.input_sets[index], before, result))
        self.calls += 1


def _events(count: int) -> list[tuple[torch.cuda.Event, torch.cuda.Event]]:
    return [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(count)]


def _elapsed(events: Sequence[tuple[torch.cuda.Event, torch.cuda.Event]]) -> list[float]:
    return [start.elapsed_time(end) * 1e-3 for start, end in events]


def _relative_standard_error(values: Sequence[float]) -> float:
    if len(values) < 2:
        return float("inf")
    mean = statistics.fmean(values)
    return statistics.stdev(values) / (len(values) ** 0.5) / mean if mean > 0 else float("inf")


class L2Flusher:
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
