"""The sandboxed child's runtime as its requests share it: the command loop and the events
sent back, the operator and candidate bound once, the integrity checks around every piece
of candidate code, and the outputs saved into the output area for the parent.

The requests themselves: child_checks.py (correctness trials, the adoption call) and
child_timing.py (timed calls); child.py puts them together and starts the loop.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import torch

from ..compare import as_output_dict
from ..dsl import DslAdapter, LaunchRecorder, adapter_for
from ..operator_files import candidate_model_class, import_file, make_model
from ..steps import Steps
from ..timed_calls import bitwise_equal, input_sample, no_python_dispatch
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


class ChildCore:
    """What every request of the child shares: the bound operator and candidate, the
    channel to the parent, the integrity checks around candidate code, the output area."""

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
                ChildCore.emit(self, event="done", **reply, steps=self.steps.as_report())
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
        ChildCore.emit(self, event="error", stage=error.stage, message=error.message,
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

    # -- what every stage does: the model, a call saved --------------------------------

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


def _tail() -> str:
    return traceback.format_exc()[-TRACEBACK_TAIL_CHARS:]


