"""The correctness stage: the candidate's trials, each judged against the reference on
inputs from seeds the parent drew (compile is the first trial's import and first call).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..compare import Comparison
from ..isolation.sandbox import CandidateError
from ..request import REFERENCE_CHECKS
from ..results import PASSED
from .shape import ShapeRunState, _kernel_names


class CorrectnessStage(ShapeRunState):
    """Trials run by the child, judged here (during its request, or after it for large shapes)."""

    def _correctness(self) -> bool:
        trials = self.settings.reference_trials if self.checks == REFERENCE_CHECKS \
            else self.settings.trials
        seeds = [self.seeds.draw() for _ in range(trials)]
        reference = self._reference()
        failures: list[Comparison] = []
        worst: list[Comparison] = []
        reported: list[dict[str, Any]] = []
        # Each trial is judged while the child runs the next, unless the shape is large: then
        # both sides would hold it on the one GPU at once (an H200 holds a public fp8 MoE
        # shape's 108 GiB reference once, not twice), and the trials are judged after the
        # child has run them all and handed its memory back.
        one_at_a_time = self._input_bytes() > self.settings.overlap_input_bytes

        def judge(event: dict[str, Any]) -> None:
            judging = time.perf_counter()
            comparison = self._check_trial(reference, seeds[event["index"]], event)
            self._judging_s += time.perf_counter() - judging
            self.result.trials_checked += 1
            worst.append(comparison)
            if not comparison.passed:
                failures.append(comparison)

        def on_trial(event: dict[str, Any]) -> None:
            if event.get("event") != "trial":
                return
            index = event.get("index")
            if not isinstance(index, int) or not 0 <= index < len(seeds) or index != len(reported):
                raise CandidateError("correctness", f"the result channel reported trial {index!r} "
                                                    f"out of order")
            if index == 0:
                self.result.stage_reached = "compile"
                self.stage = "correctness"
            reported.append(event)
            if not one_at_a_time:
                judge(event)

        done = self._request({"cmd": "correctness", **self.base, "trial_seeds": seeds},
                             self.settings.compile_timeout_s, on_event=on_trial)
        self.observed_kernels |= _kernel_names(done.get("kernel_names"), "correctness")
        if one_at_a_time:
            for event in reported:
                judge(event)
        if len(worst) != len(seeds):
            raise CandidateError("correctness", f"{len(worst)} of {len(seeds)} trials reported")
        finite = [c for c in worst if c.max_abs_error != float("inf")]
        self.result.max_abs_error = max((c.max_abs_error for c in worst), default=None)
        self.result.max_rel_error = max((c.max_rel_error for c in worst), default=None)
        if finite:
            self.result.worst_output = max(finite, key=lambda c: c.max_abs_error).worst_output
        if failures:
            self.result.fail("correctness", failed_trials_message(failures, worst))
            return False
        self.result.status = PASSED
        self.result.stage_reached = "correctness"
        return True


def failed_trials_message(failures: Sequence[Comparison], trials: Sequence[Comparison]) -> str:
    """Why a shape failed correctness, agreeing with its max-error column: the failing trial
    quoted is the one with the largest error, and where a trial that passed had a larger
    absolute error (within rtol of a large reference value) the message says so too."""
    quoted = max(failures, key=lambda c: c.max_abs_error)
    message = f"{len(failures)} of {len(trials)} trials failed; the worst: {quoted.reason}"
    overall = max(c.max_abs_error for c in trials)
    if overall > quoted.max_abs_error:
        message += f" (over all trials max abs error {overall:.4g}, within tolerance there)"
    return message
