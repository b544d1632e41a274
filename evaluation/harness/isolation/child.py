"""The sandboxed side of an evaluation: runs the candidate, never sees expected outputs.

Started by `child_process.ChildProcess` as `python -I child_main.py` in a fresh directory that
holds only the operator's public files and the candidate's source. Commands arrive as
JSON lines on stdin; events go back as JSON lines on a dedicated pipe (the candidate's
own prints go to stdout/stderr, which the parent keeps apart). Output tensors are written
as raw bytes into the shared output area the parent made (output_area.py); the parent
checks their declared layout and place against what it expects before it reads them.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import torch
from torch.autograd import DeviceType  # type: ignore[attr-defined]
from torch.utils._python_dispatch import TorchDispatchMode

from ..compare import as_output_dict
from ..dsl import DslAdapter, LaunchRecorder, adapter_for, credit_compiled, launch_names
from ..operator_files import (
    candidate_model_class,
    import_file,
    make_inputs,
    make_model,
    tensor_bytes,
)
from ..steps import Steps
from ..timed_calls import (
    FlowError,
    FreshInputs,
    TimedCall,
    TimedCallFlow,
    bitwise_equal,
    input_sample,
    no_python_dispatch,
)
from .device_memory import release_cached_memory
from .integrity import (
    Fingerprint,
    FingerprintWatch,
    HookState,
    RegistrationWatch,
    changed,
    code_loaded_since,
    fingerprint,
    hook_state,
    hooks_changed,
    install_audit_tripwire,
    loaded_mark,
    mapped_libraries,
)
from .output_area import AreaFull, AreaWriter

TRACEBACK_TAIL_CHARS = 3000
INTEGRITY_FAILED = "integrity check failed"
POISON_BYTE = 0xFF  # NaN in every float format, -1 in signed integers
MAX_POISON_BYTES = 2 * 1024**3


class StageError(Exception):
    def __init__(self, stage: str, message: str, tb: str = "") -> None:
        super().__init__(message)
        self.stage = stage
        self.message = message
        self.tb = tb


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


class ChildRuntime:
    def __init__(self, workdir: Path, events: TextIO, area: AreaWriter) -> None:
        self.workdir = workdir
        self.events = events
        self.area = area
        self.device = torch.device("cuda" if os.environ.get("ATREX_DEVICE") == "cuda" else "cpu")
        self.dsl = os.environ.get("ATREX_DSL", "triton")
        self.adapter: DslAdapter = adapter_for(self.dsl)
        self.candidate_path = workdir / "candidate.py"
        self.input_module: ModuleType | None = None  # set by `bind`
        self.candidate: ModuleType | None = None
        self.candidate_error: StageError | None = None
        self.models: dict[str, torch.nn.Module] = {}
        self.fatal = False  # set when this process can no longer run CUDA work
        self.request_id: int | None = None  # echoed in every event: the parent resyncs on it
        self.guarded: Fingerprint | None = None  # taken before the candidate is imported
        self._watch: FingerprintWatch | None = None  # the same, compared between timed calls
        self._hooks_at_bind: HookState = {}
        self._registrations: RegistrationWatch | None = None
        self._libraries: frozenset[str] = frozenset()
        self._loads_seen = 0
        self._events_at_bind: TextIO = events
        self._commands: TextIO = sys.stdin
        self._commands_at_serve: TextIO = sys.stdin
        self._threads_at_bind: set[int | None] = set()

    def _recorder(self) -> LaunchRecorder:
        return LaunchRecorder(own_files=frozenset({str(self.candidate_path)}), dsl=self.dsl)

    def warm_up(self) -> None:
        """Pay one-time start-up costs before any candidate is known.

        No kernel is launched: a warm child may be started while another evaluation is
        timing kernels on the same GPU.
        """
        self.adapter.prepare()
        # torch._dynamo rebinds torch.manual_seed (and a few others) when first imported, as
        # torch.compile or Triton's interpreter may do later: import it now, before the
        # integrity fingerprint is taken, so that lawful change is not the candidate's.
        import torch._dynamo  # noqa: F401
        _no_tqdm_monitor()
        if self.device.type == "cuda":
            from ..timing import prepare_timing

            torch.empty(1, device=self.device)  # creates the CUDA context; allocation only
            try:
                prepare_timing()
            except (RuntimeError, TypeError, AttributeError) as exc:
                # Only a head start is lost: the kernels compile at their first use.
                print(f"timing warm-up skipped: {exc}", file=sys.stderr)

    def do_bind(self, request: dict[str, Any]) -> dict[str, Any]:
        """Receive the operator's public files and the candidate (once per process)."""
        if self.input_module is not None:
            raise StageError("harness", "this child is already bound to a candidate")
        self.input_module = import_file(self.workdir / "operator" / "input.py",
                                        "atrex_operator_input")
        self.guarded = _fingerprint(self.adapter)
        self._watch = FingerprintWatch(*_guarded_spaces(self.adapter))
        self._hooks_at_bind = hook_state()
        self._registrations = RegistrationWatch()
        self._libraries = mapped_libraries()
        self._loads_seen = loaded_mark()
        self._events_at_bind = self.events
        self._threads_at_bind = {t.ident for t in threading.enumerate()}
        return {}

    # -- plumbing ------------------------------------------------------------------------

    def emit(self, **event: Any) -> None:
        # Always the pipe opened at start: a candidate that swaps `self.events` to drop the
        # genuine replies (after forging its own) does not silence them.
        self._events_at_bind.write(json.dumps({**event, "req": self.request_id}) + "\n")
        self._events_at_bind.flush()

    def serve(self, commands: TextIO) -> None:
        self._commands = commands  # the parent's answers to a hand-over arrive here too
        self._commands_at_serve = commands
        for line in commands:
            request = json.loads(line)
            command = request.pop("cmd")
            self.request_id = request.pop("req", None)
            if command == "exit":
                return
            handler = getattr(self, f"do_{command}")
            self.steps = Steps()  # this request's account of its seconds (harness/steps.py)
            self.area.start_request()  # the last request's outputs have all been judged
            started = time.perf_counter()
            try:
                reply = handler(request)
                self._check_integrity(command)
                self._release_memory()
                self.steps.add("total", time.perf_counter() - started)
                ChildRuntime.emit(self, event="done", **reply, steps=self.steps.as_report())
            except StageError as exc:
                self._release_memory()
                self._report(exc, command)
            except Exception as exc:  # noqa: BLE001 - any candidate failure is reported, not fatal
                self._release_memory()
                self._report(StageError(request.get("stage", "harness"),
                                        f"{type(exc).__name__}: {exc}", _tail()), command)
            if self.fatal:
                return

    def _release_memory(self) -> None:
        """Before replying: the parent computes the reference next, on the same GPU."""
        if self.fatal:
            return  # a corrupted CUDA context: this process is about to end anyway
        try:
            release_cached_memory(self.device)
        except RuntimeError as exc:  # a sticky CUDA error surfaces here too: reported after
            print(f"releasing cached memory failed: {exc}", file=sys.stderr)

    def _report(self, error: StageError, command: str) -> None:
        try:
            self._check_integrity(command)  # a patch explains the failure better
        except StageError as integrity:
            if not error.message.startswith(INTEGRITY_FAILED):  # (the first one found stays)
                error = StageError(integrity.stage, f"{integrity.message}; the {command} stage "
                                   f"had failed with: {error.message[:400]}", error.tb)
        ChildRuntime.emit(self, event="error", stage=error.stage, message=error.message,
                          traceback=error.tb, fatal=self.fatal)

    def _check_threads(self, stage: str = "adoption") -> None:
        """Work must happen in forward, on the calling thread: a Python thread the candidate
        started runs where neither the launch recorder nor the timed region can see it."""
        started = [t for t in threading.enumerate() if t.ident not in self._threads_at_bind
                   and t.is_alive()]
        if started:
            names = ", ".join(sorted(t.name for t in started)[:5])
            raise StageError(stage, f"the candidate runs {len(started)} background "
                                         f"thread(s) ({names}); all work must happen inside "
                                         "forward, on the calling thread")
        others = _other_processes()
        if others:
            raise StageError(stage, f"the candidate started {others} other process(es); "
                                         "all work must happen inside forward, in this process")

    def _check_integrity(self, command: str) -> None:
        """After candidate code ran: the harness's functions must be the ones it started with."""
        if self.guarded is None or self.candidate is None:
            return
        replaced = changed(self.guarded, _fingerprint(self.adapter))
        if self.events is not self._events_at_bind:
            replaced.append("the result channel (ChildRuntime.events)")
        replaced += [f"ChildRuntime.{name} (on the instance)" for name in list(vars(self))
                     if hasattr(type(self), name)]
        self._fail_if_tampered(replaced, self._installed(look=True),
                               _STAGE_OF.get(command, "harness"))

    def _installed(self, look: bool = False) -> list[str]:
        """Hooks the candidate left where the harness's own calls run into them, and kernels
        registered for aten operators (from Python always; from C++ where a shared object
        was mapped since the last look, which only a library load or an import can do)."""
        found = hooks_changed(self._hooks_at_bind, hook_state())
        if self._registrations is not None:
            found += self._registrations.python_overrides()[:3]
            if look or code_loaded_since(self._loads_seen):  # (a raw dlopen is seen at `look`)
                self._loads_seen = loaded_mark()
                libraries = mapped_libraries()
                if libraries != self._libraries:
                    self._libraries = libraries
                    found += self._registrations.tables_changed()[:3]
        return found

    def _fail_if_tampered(self, replaced: list[str], installed: list[str], stage: str) -> None:
        if not replaced and not installed:
            return
        self.fatal = True  # this process can no longer be trusted to measure anything
        parts = []
        if replaced:
            parts.append(f"the candidate replaced {_listed(replaced)}")
        if installed:
            parts.append(f"the candidate left installed {_listed(installed)} (nothing of the "
                         "candidate's may run between its calls)")
        raise StageError(stage, f"{INTEGRITY_FAILED}: " + "; ".join(parts))

    def _guard(self, thorough: bool = True) -> None:
        """Between two timed calls, before the harness draws, saves or compares anything:
        nothing of the candidate's may be in place to run inside that work. Not `thorough`:
        the hooks, threads and processes only, not every function the harness relies on
        (0.2 ms against 0.7; TimedCallFlow.check_every says when that suffices)."""
        if self._watch is None:
            return
        replaced = self._watch.changed() if thorough else []
        if self.events is not self._events_at_bind or self._commands is not self._commands_at_serve:
            replaced.append("the channel to the parent (ChildRuntime)")
        self._fail_if_tampered(replaced, self._installed(), "performance")
        try:
            self._check_threads("performance")
        except StageError:
            self.fatal = True  # its threads or processes run on: the next shape gets a new child
            raise

    # -- stages --------------------------------------------------------------------------

    def model_for(self, request: Mapping[str, Any]) -> torch.nn.Module:
        """Compile stage part 1: import the candidate (once) and instantiate it."""
        key = request["shape_id"]
        if key in self.models:
            return self.models[key]
        module = self._candidate_module()
        try:
            cls = candidate_model_class(module)
            model = make_model(cls, request["init_kwargs"], request["init_seed"], self.device)
        except Exception as exc:  # noqa: BLE001
            raise StageError("compile", f"instantiating Model failed: {type(exc).__name__}: {exc}",
                             _tail()) from exc
        self.models.clear()  # one shape at a time: keep memory for this one
        self.models[key] = model
        return model

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
            ChildRuntime.emit(self, event="trial", index=index, seconds=seconds, **saved)
        return {"kernel_names": sorted(names)}

    @contextlib.contextmanager
    def _observing(self, names: set[str]) -> Iterator[None]:
        """Adds to `names` what the calls inside ran: every device activity by name on a
        GPU (the profiler, device records only), every DSL launch by name on a CPU."""
        if self.device.type == "cuda":
            from ..timing import device_records

            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) \
                    as prof:
                yield
            names.update(name for name, _, _ in device_records(prof))
        else:
            launches = self._recorder()
            with self.adapter.recording(launches):
                yield
            names.update(launch_names(launches))

    def _save_call(self, result: object, inputs: Mapping[str, Any],
                   before: Mapping[str, torch.Tensor], stage: str) -> dict[str, Any]:
        """Outputs and changed inputs of one call, in the output area, for the parent.
        On the device: comparisons of the inputs (timed_calls.rehearse_gap does the same
        for the device accounting) and copies, nothing else."""
        outputs = self._checked_outputs(result, stage)
        with no_python_dispatch():
            modified = {k: inputs[k] for k, v in before.items()
                        if not bitwise_equal(v, inputs[k])}
            aliases = {o: i for o, t in outputs.items() for i, v in inputs.items()
                       if isinstance(v, torch.Tensor) and _overlaps(t, v)}
            try:
                offset, layout = self.area.write_call(outputs, modified)
            except AreaFull as exc:
                raise StageError(stage, str(exc)) from None
            given = input_sample(before)
        return {"offset": offset, "layout": layout, "aliases": aliases, "input_sample": given}

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
        ChildRuntime.emit(self, event="handover", **saved)
        if not self._commands_at_serve.readline():
            raise StageError("harness", "the parent closed the command channel")

    def _ask(self, question: dict[str, Any]) -> dict[str, Any]:
        """The parent's answer between two timed calls (timed_calls.TimedCallFlow): whether
        the call that returned is checked, and the next call's seed."""
        ChildRuntime.emit(self, event="ask", **question)
        line = self._commands_at_serve.readline()
        if not line:
            raise StageError("harness", "the parent closed the command channel")
        answer = json.loads(line)
        if not isinstance(answer, dict) or answer.get("cmd") != "answer":
            raise StageError("harness", "the parent's answer between timed calls is garbled")
        return answer

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
            from ..timing import device_records

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

    def do_timing(self, request: dict[str, Any]) -> dict[str, Any]:
        from ..timing import (
            GapAllowance,
            MarkersForged,
            TimingSettings,
            WorkOutsideWindow,
            not_measured,
        )

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

    # -- helpers -------------------------------------------------------------------------

    def _inputs(self) -> ModuleType:
        if self.input_module is None:
            raise StageError("harness", "no operator bound to this child")
        return self.input_module

    def _candidate_module(self) -> ModuleType:
        if self.candidate is None and self.candidate_error is None:
            try:
                self.candidate = import_file(self.candidate_path, "candidate")
            except BaseException as exc:  # noqa: BLE001 - SystemExit at import is a compile error too
                self.candidate_error = StageError(
                    "compile", f"importing the candidate raised {type(exc).__name__}: {exc}", _tail())
        if self.candidate_error is not None:
            raise self.candidate_error
        assert self.candidate is not None
        return self.candidate

    def _checked_outputs(self, result: object, stage: str) -> dict[str, torch.Tensor]:
        outputs = as_output_dict(result)
        if outputs is None:
            raise StageError(stage, f"forward returned {type(result).__name__}; expected a tensor "
                                    "or a dict of tensors")
        for name, tensor in outputs.items():
            if type(tensor) is not torch.Tensor:
                raise StageError(stage, f"output '{name}' is a {type(tensor).__name__}, "
                                        "not a plain torch.Tensor")
            if tensor.device.type != self.device.type:
                raise StageError(stage, f"output '{name}' is on {tensor.device}, "
                                        f"expected {self.device.type}")
        return outputs


_STAGE_OF = {"correctness": "correctness", "adoption": "adoption", "timing": "performance"}


def _guarded_spaces(adapter: DslAdapter) -> tuple[list[str], list[tuple[str, type]]]:
    # atrex_operator_input: the operator's input.py, which draws the inputs the candidate
    # gets; replaced, it would let a candidate see (or make) every input ahead of time.
    return [*adapter.guarded_modules(), "atrex_operator_input"], adapter.guarded_classes()


def _fingerprint(adapter: DslAdapter) -> Fingerprint:
    modules, classes = _guarded_spaces(adapter)
    return fingerprint(extra_modules=modules, extra_classes=classes)


def _listed(names: list[str]) -> str:
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


# Read before any candidate code runs: the sandbox says whether this process has a PID
# namespace of its own (then PID 1 is the sandbox's init shell and nothing else is ours).
_OWN_PID_NAMESPACE = os.environ.pop("ATREX_PID_NAMESPACE", "") == "1"


def _other_processes() -> int:
    """Processes in this sandbox besides this one and the sandbox's init: the harness
    starts nothing else, so any other process is the candidate's."""
    if not _OWN_PID_NAMESPACE:
        return 0  # no PID namespace (not root): other processes are not ours to judge
    mine = {"1", str(os.getpid())}
    try:
        return sum(1 for name in os.listdir("/proc") if name.isdigit() and name not in mine)
    except OSError:
        return 0


def _reseed() -> None:
    """After the inputs are drawn: the RNG state no longer tells the candidate their seed."""
    torch.manual_seed(secrets.randbits(63))


def _no_tqdm_monitor() -> None:
    """Every tqdm bar, even a disabled one (Inductor makes those), starts tqdm's monitor
    thread unless monitor_interval is 0; the thread check would blame the candidate."""
    try:
        import tqdm
    except ImportError:
        return
    tqdm.tqdm.monitor_interval = 0


def poison(device: torch.device, nbytes: int) -> None:
    """Fill memory the allocator will hand out next, so unwritten outputs show as NaN."""
    buffer = torch.empty(min(nbytes, MAX_POISON_BYTES), dtype=torch.uint8, device=device)
    buffer.fill_(POISON_BYTE)
    del buffer


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0 or a.device != b.device:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    start_a, start_b = sa.data_ptr(), sb.data_ptr()
    return start_a < start_b + sb.nbytes() and start_b < start_a + sa.nbytes()


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


def _tail() -> str:
    return traceback.format_exc()[-TRACEBACK_TAIL_CHARS:]


def main() -> None:
    workdir = Path.cwd()
    events = os.fdopen(int(os.environ.pop("ATREX_EVENT_FD")), "w", buffering=1)
    try:
        area = AreaWriter(int(os.environ.pop("ATREX_OUTPUT_FD")),
                          int(os.environ.pop("ATREX_OUTPUT_BYTES")),
                          pin=os.environ.get("ATREX_DEVICE") == "cuda")
        runtime = ChildRuntime(workdir, events, area)
    except Exception as exc:  # noqa: BLE001 - report why the sandbox could not start
        events.write(json.dumps({"event": "error", "stage": "harness",
                                 "message": f"child start failed: {exc}", "traceback": _tail()}))
        events.flush()
        raise
    install_audit_tripwire()  # before any candidate code: it sees every later audit hook
    started = time.perf_counter()
    runtime.warm_up()
    ChildRuntime.emit(runtime, event="ready", device=str(runtime.device), torch=torch.__version__,
                      warm_up_seconds=time.perf_counter() - started, monotonic=time.monotonic())
    runtime.serve(sys.stdin)
