"""The child's timing request: timed calls on a GPU (timing.measure_forward), unmeasured
ones on the CPU, with the parent answering between two calls (timed_calls.TimedCallFlow) and
judging the checked ones while the child waits (the hand-over).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import torch

from ..dsl import launch_names
from ..operator_files import make_inputs
from ..timed_calls import FlowError, FreshInputs, TimedCall, TimedCallFlow
from .child_core import INTEGRITY_FAILED, ChildCore, StageError, _other_processes, _reseed, _tail


class TimingRequests(ChildCore):
    """`timing`: the candidate's calls timed, some of them handed over to be checked."""

    def do_timing(self, request: dict[str, Any]) -> dict[str, Any]:
        from ..timing import TimingSettings, not_measured
        from ..timing_records import GapAllowance, MarkersForged, WorkOutsideWindow

        model = self.model_for(request)
        settings = TimingSettings(**request["settings"])

        def draw(seed: int) -> dict[str, Any]:
            inputs = make_inputs(self._inputs(), request["input_kwargs"], seed, self.device)
            _reseed()
            return inputs

        with self.steps("inputs"):
            sets = [draw(seed) for seed in request["seeds"]]
        fresh = FreshInputs(draw, sets, request["seeds"])

        def save(call: TimedCall) -> dict[str, Any]:
            saved = self._save_call(call.result, call.inputs, call.before, "performance")
            self._hand_over({**saved, "seed": call.seed, "sample": call.sample})
            return saved

        flow = TimedCallFlow(fresh, self._ask, save, self._guard)

        def forward(inputs: Mapping[str, torch.Tensor]) -> object:
            with torch.no_grad():
                return model(**inputs)

        try:
            if self.device.type == "cuda":
                from ..graph_capture import CudaContextCorrupted
                from ..timing import measure_forward

                try:
                    report = measure_forward(forward, sets, settings, flow, steps=self.steps,
                                             allowance=GapAllowance.from_wire(
                                                 request.get("gap_allowance")))
                except CudaContextCorrupted as exc:
                    self.fatal = True
                    raise StageError("performance", str(exc), _tail()) from exc
                except MarkersForged as exc:
                    raise StageError("performance", f"the timing records were tampered with: "
                                                    f"{exc}; no kernel may be named like the "
                                                    "harness's markers") from exc
                except WorkOutsideWindow as exc:
                    raise StageError("performance", str(exc)) from exc
            else:
                with self.steps("timing.warmup"):
                    for inputs in sets:  # the warm-up calls a GPU run makes before timing
                        forward(inputs)
                launches = self._recorder()
                for sample in range(settings.unmeasured_calls):
                    index = sample % len(sets)
                    with self.steps("timing.sample.fresh_inputs"):
                        seed, before = flow.before(index)
                    with self.steps("timing.sample.call"), self.adapter.recording(launches):
                        result = forward(sets[index])
                    flow.after(TimedCall(sample, seed, sets[index], before, result))
                    del result
                report = not_measured("not measured: no GPU (CPU interpreter mode)")
                report.timed_kernel_names = sorted(launch_names(launches))
            with self.steps("timing.sample.spot_checks"):
                checked = flow.finish()
        except FlowError as exc:
            self.fatal = self.fatal or str(exc).startswith(INTEGRITY_FAILED)
            raise StageError("performance", str(exc)) from exc
        self._check_threads()
        report.fresh_inputs = fresh.fresh
        report.checked_calls = len(checked)
        report.timed_calls = flow.calls
        return {"timing": report.to_dict(), "checked_calls": checked}

    def _hand_over(self, saved: dict[str, Any]) -> None:
        """Wait until the parent has judged (or copied) a saved timed call: until it answers
        no code of the candidate runs, so none can rewrite in the output area what is judged
        (a timed call whose work was skipped, fixed up in a later call the median never sees).
        """
        others = _other_processes()
        if others:  # it could rewrite the output area while the parent reads it
            self.fatal = True
            raise StageError("performance", f"{others} other process(es) of the candidate's "
                                            "were alive at the hand-over of a checked call; all "
                                            "work must happen inside forward, in this process")
        ChildCore.emit(self, event="handover", **saved)
        if not self._commands_at_serve.readline():
            raise StageError("harness", "the parent closed the command channel")

    def _ask(self, question: dict[str, Any]) -> dict[str, Any]:
        """The parent's answer between two timed calls (timed_calls.TimedCallFlow): whether
        the call that returned is checked, and the next call's seed."""
        ChildCore.emit(self, event="ask", **question)
        line = self._commands_at_serve.readline()
        if not line:
            raise StageError("harness", "the parent closed the command channel")
        answer = json.loads(line)
        if not isinstance(answer, dict) or answer.get("cmd") != "answer":
            raise StageError("harness", "the parent's answer between timed calls is garbled")
        return answer
