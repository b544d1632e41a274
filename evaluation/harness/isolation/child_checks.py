"""The child's correctness requests: the trials (the first is the compile stage's first
call) and the adoption call, each observed (device activity by name on a GPU, DSL launches
and aten ops on a CPU) and saved for the parent to judge.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch.autograd import DeviceType  # type: ignore[attr-defined]
from torch.utils._python_dispatch import TorchDispatchMode

from ..dsl import LaunchRecorder, credit_compiled, launch_names
from ..operator_files import make_inputs, tensor_bytes
from .child_core import ChildCore, StageError, _reseed, _synchronize, _tail, poison

# What Triton's interpreter dispatches itself while it runs a kernel on the CPU (measured
# over the fixture's Triton candidates: new_empty, set_, empty, copy_), plus views.
INTERPRETER_OPS = frozenset({"new_empty", "set_", "empty", "empty_strided", "copy_", "detach",
                             "alias", "view", "lift_fresh", "_to_copy"})


def _base_op(name: str) -> str:
    return name.split("::")[-1].split(".")[0]


class AtenRecorder(TorchDispatchMode):
    """Counts aten ops the candidate dispatches outside DSL launches."""

    def __init__(self, launches: LaunchRecorder) -> None:
        super().__init__()
        self.launches = launches
        self.ops: dict[str, int] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.name()
        # Inside a launch only the interpreter's own data movement is the DSL's; torch work
        # done there (in a callable grid, say) is still the candidate's torch work.
        if self.launches.depth == 0 or _base_op(name) not in INTERPRETER_OPS:
            self.ops[name] = self.ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


class CorrectnessRequests(ChildCore):
    """`correctness` and `adoption`: calls the parent judges against its reference."""

    def do_correctness(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.steps("import_and_init"):  # the candidate's import (once) and Model(...)
            model = self.model_for(request)
        names: set[str] = set()  # what the trials ran, for the parent's check of timed calls
        for index, seed in enumerate(request["trial_seeds"]):
            stage = "compile" if index == 0 else "correctness"
            with self.steps("inputs"):
                inputs = make_inputs(self._inputs(), request["input_kwargs"], seed, self.device)
                _reseed()
                before = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
                poison(self.device, max(2 * tensor_bytes(inputs), 1 << 20))
                _synchronize(self.device)
            started = time.perf_counter()
            try:
                with torch.no_grad(), self._observing(names):
                    call_started = time.perf_counter()
                    result = model(**inputs)
                    _synchronize(self.device)
                    call_s = time.perf_counter() - call_started
            except Exception as exc:  # noqa: BLE001
                what = "first call" if index == 0 else f"correctness trial {index}"
                raise StageError(stage, f"{what} raised {type(exc).__name__}: {exc}", _tail()) from exc
            seconds = time.perf_counter() - started
            self.steps.add("first_call" if index == 0 else "trial_calls", call_s)
            # the profiler's start and stop around the call (GPU), the recorder's on a CPU
            self.steps.add("observing", max(seconds - call_s, 0.0))
            with self.steps("save_outputs"):
                saved = self._save_call(result, inputs, before, stage)
            ChildCore.emit(self, event="trial", index=index, seconds=seconds, **saved)
        return {"kernel_names": sorted(names)}

    @contextlib.contextmanager
    def _observing(self, names: set[str]) -> Iterator[None]:
        """Adds to `names` what the calls inside ran: every device activity by name on a
        GPU (the profiler, device records only), every DSL launch by name on a CPU."""
        if self.device.type == "cuda":
            from ..timing_records import device_records

            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) \
                    as prof:
                yield
            names.update(name for name, _, _ in device_records(prof))
        else:
            launches = self._recorder()
            with self.adapter.recording(launches):
                yield
            names.update(launch_names(launches))

    def do_adoption(self, request: dict[str, Any]) -> dict[str, Any]:
        model = self.model_for(request)
        with self.steps("inputs"):
            inputs = make_inputs(self._inputs(), request["input_kwargs"], request["seed"],
                                 self.device)
            _reseed()
            before = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        launches = self._recorder()
        kernels: list[tuple[str, float]] = []
        if self.device.type == "cuda":
            # The profiler sees both device kernels and aten ops. No dispatch mode here:
            # under one, torch.compile'd code falls back to eager and would look like torch.
            from ..timing_records import device_records

            activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            with self.steps("profiled_call"), self.adapter.recording(launches), \
                    torch.no_grad(), torch.profiler.profile(activities=activities) as prof:
                result = model(**inputs)
                torch.cuda.synchronize()
            with self.steps("records_parse"):
                kernels = [(name, (end - start) * 1e-9)
                           for name, start, end in device_records(prof)]
            names = {name for name, _ in kernels}
            credit_compiled(launches, self.adapter.compiled_kernels(), names)
            with self.steps("records_parse"):
                aten_ops = _profiled_aten_ops(prof)
        else:
            # The CPU has no device records: aten ops dispatched outside DSL launches are the
            # evidence (the interpreter's own ops happen inside launches and are skipped).
            with self.adapter.recording(launches), torch.no_grad(), AtenRecorder(launches) as rec:
                result = model(**inputs)
            aten_ops = rec.ops
            names = launch_names(launches)
        self._check_threads()
        # The recorded call's output is checked too: a candidate that behaves one way while
        # it is watched and another while it is checked would otherwise pass both.
        with self.steps("save_outputs"):
            call = self._save_call(result, inputs, before, "adoption")
        return {
            "call": call,
            "dsl_kernel_names": sorted(launches.own_kernels),
            "foreign_dsl_launches": launches.foreign_launches,
            "other_dsl_kernels": launches.other_dsl_kernels,
            "other_dsl_launch_count": launches.other_dsl_launches,
            "library_kernels": launches.library_kernels,
            "library_launch_count": launches.library_launches,
            "kernels": kernels,
            "kernel_names": sorted(names),
            "aten_ops": aten_ops,
            "dsl_launch_count": launches.own_launches,
            "compiled_frames": _compiled_frames(),
            "device_timed": self.device.type == "cuda",
        }


def _profiled_aten_ops(prof: Any) -> dict[str, int]:
    ops: dict[str, int] = {}
    for event in prof.profiler.kineto_results.events():
        name = event.name()
        if event.device_type() == DeviceType.CPU and name.startswith("aten::"):
            ops[name] = ops.get(name, 0) + 1
    return ops


def _compiled_frames() -> int:
    if "torch._dynamo" not in sys.modules:
        return 0
    from torch._dynamo.utils import counters

    return int(counters["stats"].get("unique_graphs", 0))
