"""The performance stage: the timing request (timed calls on a GPU, unmeasured ones on the
CPU), steered and partly checked by this side while it runs, and the child's timing report
checked as untrusted input.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .. import environment
from ..confidence import host_repeat_error, median_standard_error, timer_step
from ..isolation.device_memory import release_cached_memory
from ..isolation.sandbox import CandidateError
from ..operator_files import make_inputs
from ..request import FULL_CHECKS, REFERENCE_CHECKS
from ..timed_calls import CallPlan, FlowError, rehearse_gap
from ..timing import TimingReport, TimingSettings, record_gap_allowance
from ..timing_records import GapAllowance
from .shape import ShapeRunState, _kernel_names, _trusted_allocations

MAX_TIMING_SAMPLES = TimingSettings().max_samples


class PerformanceStage(ShapeRunState):
    """Timed calls, some checked against the reference (timed_calls)."""

    def _performance(self) -> None:
        """Timed calls (GPU) or unmeasured ones run the same way (CPU); either way some of
        them are checked against the reference (timed_calls)."""
        self.stage = "performance"
        per_set = max(self._input_bytes(), 1)
        # a third of the byte budget: the sets, their pristine copies and one fresh draw
        sets = max(1, min(self.settings.timing_input_sets,
                          self.settings.timing_input_bytes // (3 * per_set)))
        timing = self.settings.timing
        if self.device.type != "cuda":
            # nothing is timed: two buffer sets, so the unmeasured calls revisit one as a
            # timing loop does, and every call checked, so the CPU run is deterministic
            sets = min(sets, 2)
            timing = dataclasses.replace(timing, check_probability=1.0,
                                         max_checks=timing.unmeasured_calls)
        if self.checks == REFERENCE_CHECKS:
            timing = dataclasses.replace(timing, max_checks=1)
        # a captured graph is trusted once a replay matched the eager call within these
        timing = dataclasses.replace(timing, capture_atol=self.job.tolerance.atol,
                                     capture_rtol=self.job.tolerance.rtol)
        graph_error = None
        poisoned_on = self.trusted.capture_poisoned_on
        if timing.allow_graph and poisoned_on is not None:
            timing = dataclasses.replace(timing, allow_graph=False)
            graph_error = (f"not tried: capturing this candidate's forward corrupted the CUDA "
                           f"context on shape {poisoned_on} of this evaluation")
        buffer_seeds = [self.seeds.draw() for _ in range(sets)]
        request = {"cmd": "timing", **self.base, "seeds": buffer_seeds,
                   "settings": dataclasses.asdict(timing)}
        if self.device.type == "cuda":
            request["gap_allowance"] = self._gap_allowance(buffer_seeds[0]).to_wire()
        timeout = timing.max_seconds + self.settings.call_timeout_s
        clocks_before = environment.clocks(self.device)
        checks = _TimedCallJudge(self, timing, buffer_seeds)
        try:
            done = self._request(request, timeout, on_event=checks.on_event)
        except CandidateError as exc:
            if not timing.allow_graph or "graph capture" not in exc.message:
                raise
            # A failed capture poisoned that process's CUDA context: a fresh child, eagerly.
            self.child.kill()
            self.trusted.capture_poisoned_on = self.spec.id
            graph_error = exc.message.splitlines()[0][:300]
            request["settings"] = dataclasses.asdict(dataclasses.replace(timing, allow_graph=False))
            checks = _TimedCallJudge(self, timing, buffer_seeds)
            done = self._request(request, timeout, on_event=checks.on_event)
        self.result.environment = {**self.trusted.environment, "clocks_before": clocks_before,
                                   "clocks_after": environment.clocks(self.device)}
        report = _checked_timing(done.get("timing"))
        if graph_error is not None:
            report["graph_error"] = graph_error
        if self.checks == FULL_CHECKS:
            # The operator's own reference is the trusted side's code, which does not detect
            # the timer; its vendor kernels may differ from call to call with data-dependent
            # sizes (cuBLAS picks a GEMM kernel by M: an expert's tokens in MoE routing).
            _check_timed_kernels(report["timed_kernel_names"], self.observed_kernels)
        checks.finish(done.get("checked_calls"), report)
        self.result.timing = report
        self.result.stage_reached = "performance"

    def _gap_allowance(self, seed: int) -> GapAllowance:
        """What the harness's own work between two timed calls launches on this device, done
        here on the trusted side's tensors (timing_records.GapAllowance)."""
        def draw(seed: int) -> dict[str, Any]:
            return make_inputs(self.trusted.inputs, self.spec.input_kwargs, seed, self.device)

        with _trusted_allocations(self.device), self.steps("gap_allowance"):
            allowance = record_gap_allowance(rehearse_gap(draw, seed))
        release_cached_memory(self.device)
        return allowance


class _TimedCallJudge:
    """The timed calls of one timing request, as the trusted side steers and judges them.

    Between two timed calls the child asks (timed_calls.TimedCallFlow); the judge answers
    whether the call that just returned is checked and the seed of the next call's
    contents, both drawn here, after that call returned: the child cannot choose, predict
    or pin either. A checked call is handed over: the child waits after saving it until the
    parent answers (child_timing._hand_over), so no code of the candidate runs between the save and
    the judging, and it is judged against the reference for the seed this side gave. On a
    shape judged one side at a time (larger than overlap_input_bytes: both sides cannot
    hold it on the GPU at once), the call is copied to host memory then and judged after the
    request, from that copy."""

    def __init__(self, shape: ShapeRunState, timing: TimingSettings,
                 buffer_seeds: Sequence[int]) -> None:
        self.shape = shape
        self.plan = CallPlan(shape.seeds.draw, timing.check_probability, timing.max_checks)
        self.buffer_seeds = list(buffer_seeds)
        self.one_at_a_time = shape._input_bytes() > shape.settings.overlap_input_bytes
        self.handed: list[dict[str, Any]] = []
        self.failure: str | None = None

    def on_event(self, event: dict[str, Any]) -> dict[str, Any] | None:
        kind = event.get("event")
        if kind == "ask":
            try:
                return self.plan.answer(event)
            except FlowError as exc:
                raise CandidateError("performance", str(exc)) from None
        if kind == "handover":
            self._take(event)
        return None

    def _take(self, event: dict[str, Any]) -> None:
        sample = event.get("sample")
        picked = self.plan.picked
        if not (isinstance(sample, int) and picked and sample == picked[-1]
                and len(self.handed) == len(picked) - 1):
            raise CandidateError("performance", "the result channel sent an invalid hand-over "
                                                "of a checked timed call")
        # judged against the contents this side gave (or, where draws do not fit the
        # buffers, the buffer set's own draw the child restored)
        event = {**event, "seed": self._seed_of(sample)}
        self.handed.append(event)
        self.shape.child.check_alone("the hand-over of a checked timed call")
        if self.one_at_a_time:
            self.shape.child.take_call(event.get("offset"), event.get("layout"))
        elif self.failure is None:
            self._judge(event, taken=False)

    def _seed_of(self, sample: int) -> int:
        if self.plan.fresh:
            return self.plan.given[sample]
        return self.buffer_seeds[sample % len(self.buffer_seeds)]

    def finish(self, checked: object, report: Mapping[str, Any]) -> None:
        """Every call the child says it checked was handed over (same sample and place),
        at least one; every call the timing ran got its contents from here; all of the
        checked ones right."""
        if not isinstance(checked, list) or not 1 <= len(checked) <= self.plan.max_checks \
                or [_call_key(c) for c in checked] != [_call_key(c) for c in self.handed] \
                or len(self.handed) != len(self.plan.picked):
            raise CandidateError("performance", "the result channel sent no valid report of the "
                                                "checked timed calls")
        if report.get("timed_calls") != len(self.plan.given) or not self.plan.finished():
            raise CandidateError("performance", "the timing report's calls are not the ones the "
                                                "parent gave contents for")
        if self.one_at_a_time:
            for event in self.handed:
                if self.failure is None:
                    self._judge(event, taken=True)
        if self.failure is not None:
            raise CandidateError("performance", self.failure)

    def _judge(self, event: dict[str, Any], taken: bool) -> None:
        shape = self.shape
        judging = time.perf_counter()
        comparison = shape._check_trial(shape._reference(), event["seed"], event, taken=taken)
        shape._judging_s += time.perf_counter() - judging
        if not comparison.passed:
            self.failure = f"timed call {event['sample']} gave a wrong result: {comparison.reason}"


def _call_key(call: object) -> tuple[object, object]:
    if not isinstance(call, dict):
        return (None, None)
    return (call.get("sample"), call.get("offset"))


def _check_timed_kernels(timed: object, observed: set[str]) -> None:
    """Every timed call runs only kernels the observed calls ran (how often may vary with
    the data, as MoE routing does): a candidate that detects the timer cannot switch paths."""
    new = sorted(_kernel_names(timed, "performance") - observed)
    if new:
        shown = ", ".join(new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
        raise CandidateError("performance", f"behaviour changed under timing: {len(new)} "
                                            f"kernel(s) ran only in timed calls, never in the "
                                            f"calls observed (correctness trials, adoption): "
                                            f"{shown}; the shape is not scored")


# Every number of the report (the times, the error, the kernels per forward, the seconds)
_NUMERIC_TIMING = tuple(f.name for f in dataclasses.fields(TimingReport)
                        if f.type in ("float", "float | None"))


def _checked_timing(timing: object) -> dict[str, Any]:
    """The child's timing report is untrusted: numbers must be numbers before they are used."""
    numeric = _NUMERIC_TIMING
    if not isinstance(timing, dict) or not isinstance(timing.get("measured"), bool) or any(
            not isinstance(timing.get(k), int | float | None) or isinstance(timing.get(k), bool)
            for k in numeric) or not isinstance(timing.get("timed_kernel_names"), list):
        raise CandidateError("performance", "the result channel sent a malformed timing report")
    if not isinstance(timing.get("timed_calls"), int) or isinstance(timing.get("timed_calls"), bool):
        raise CandidateError("performance", "the timing report does not say how many calls ran")
    if timing["measured"] and not (isinstance(timing.get("median_s"), int | float)
                                   and timing["median_s"] > 0):
        raise CandidateError("performance", "the timing report has no positive median")
    if timing["measured"]:
        samples = timing.get("samples_s")
        if not (isinstance(samples, list) and 0 < len(samples) <= MAX_TIMING_SAMPLES
                and len(samples) == timing.get("n") and all(
                    isinstance(s, int | float) and not isinstance(s, bool) and s > 0
                    for s in samples)):
            raise CandidateError("performance", "the timing report's samples are malformed")
        if not math.isclose(statistics.median(samples), timing["median_s"], rel_tol=1e-9):
            raise CandidateError("performance", "the timing report's median is not the median "
                                                "of its samples")
        # the trusted side's own figure: how far the median could move, never less than
        # the timer's step allows (confidence.py)
        error = median_standard_error(samples, timer_step(
            timing.get("span_measured_by"), timing.get("method")))
        if error is not None and timing.get("method") != "graph":
            # an eager forward's host share moves from process to process (confidence.py)
            error = math.hypot(error, host_repeat_error(timing["median_s"],
                                                        timing.get("busy_median_s")))
        timing["median_se_s"] = error
    return timing
