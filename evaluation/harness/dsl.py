"""Per-DSL launch recording, behind one small interface.

Adoption detection needs two things from a DSL: which of its kernels the candidate's own
source launched (to credit their device time), and when a launch is in progress (ops the
DSL runtime itself dispatches belong to the launch, not to the candidate). Adding Gluon,
CuTe DSL or FlyDSL means adding one `DslAdapter` here; the stages do not change.

Runs inside the sandboxed child.
"""

from __future__ import annotations

import contextlib
import importlib.util
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class LaunchRecorder:
    """Collects DSL launches; `depth` > 0 while a launch runs on this thread."""

    own_files: frozenset[str]
    own_kernels: set[str] = field(default_factory=set)
    own_launches: int = 0
    foreign_launches: list[str] = field(default_factory=list)
    _local: threading.local = field(default_factory=threading.local)

    @property
    def depth(self) -> int:
        return getattr(self._local, "depth", 0)

    def enter(self) -> None:
        self._local.depth = self.depth + 1

    def leave(self) -> None:
        self._local.depth = self.depth - 1

    def launched(self, name: str, source_file: str | None) -> None:
        """A launch that completed. Launches that raised, and `warmup` compilations, are
        not counted: a kernel that fails on purpose before torch does the work (or is only
        compiled, never run) must not count as the candidate's own work."""
        if source_file in self.own_files:
            self.own_kernels.add(name)
            self.own_launches += 1
        else:
            self.foreign_launches.append(name)


def launch_names(recorder: LaunchRecorder) -> set[str]:
    """Every kernel the recorder saw launched, the candidate's own and foreign ones."""
    return set(recorder.own_kernels) | set(recorder.foreign_launches)


class DslAdapter(Protocol):
    name: str

    def prepare(self) -> None:
        """Import the DSL's runtime before the first candidate needs it."""

    def recording(self, recorder: LaunchRecorder) -> contextlib.AbstractContextManager[None]:
        """While active, report every launch of this DSL to `recorder`."""

    def guarded_modules(self) -> list[str]:
        """Modules of the DSL's runtime a candidate must not patch (integrity check)."""

    def guarded_classes(self) -> list[tuple[str, type]]:
        """Classes of the DSL's runtime a candidate must not patch (integrity check)."""


class TritonAdapter:
    """Triton: wrap JITFunction.run (GPU) and InterpretedFunction.run (TRITON_INTERPRET=1).

    `kernel[grid](...)` and the autotuner both end in `.run`, so wrapping it sees every
    launch and brackets it. On a GPU, Inductor launches compiled kernels without `.run`;
    Triton's launch-enter hook catches those (it does not fire in the interpreter).
    """

    name = "triton"

    def prepare(self) -> None:
        import triton  # noqa: F401 - the import itself is the preparation

    @contextlib.contextmanager
    def recording(self, recorder: LaunchRecorder) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for cls in self._launchable_classes():
                stack.enter_context(_wrapped_run(cls, recorder))
            stack.enter_context(_launch_enter_hook(recorder))
            yield

    def guarded_modules(self) -> list[str]:
        return ["triton.runtime.jit", "triton.runtime.interpreter", "triton.runtime.autotuner",
                "triton.knobs"]

    def guarded_classes(self) -> list[tuple[str, type]]:
        return [(f"triton.{cls.__name__}", cls) for cls in self._launchable_classes()]

    @staticmethod
    def _launchable_classes() -> list[type]:
        from triton.runtime import jit

        classes: list[type] = [jit.JITFunction]
        with contextlib.suppress(ImportError):
            from triton.runtime import interpreter

            classes.append(interpreter.InterpretedFunction)
        return classes


@contextlib.contextmanager
def _wrapped_run(cls: type, recorder: LaunchRecorder) -> Iterator[None]:
    original: Callable[..., Any] = cls.run  # type: ignore[attr-defined]

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self, "fn", None)
        code = getattr(fn, "__code__", None)
        recorder.enter()
        try:
            result = original(self, *args, **kwargs)
        finally:
            recorder.leave()
        if not kwargs.get("warmup"):
            recorder.launched(getattr(fn, "__name__", "?"), code.co_filename if code else None)
        return result

    cls.run = run  # type: ignore[attr-defined]
    try:
        yield
    finally:
        cls.run = original  # type: ignore[attr-defined]


@contextlib.contextmanager
def _launch_enter_hook(recorder: LaunchRecorder) -> Iterator[None]:
    """Record launches that bypass `.run` (Inductor's compiled kernels on a GPU)."""
    try:
        import triton

        runtime = triton.knobs.runtime
    except (ImportError, AttributeError):
        yield
        return
    def hook(metadata: Any) -> None:
        # Launches through `.run` fire this hook inside the bracket and are counted there.
        if recorder.depth == 0:
            recorder.foreign_launches.append(_metadata_name(metadata))

    chain = runtime.launch_enter_hook
    if hasattr(chain, "add") and hasattr(chain, "remove"):
        chain.add(hook)
        try:
            yield
        finally:
            chain.remove(hook)
    else:  # older Triton: a plain attribute holding one callable
        previous = chain

        def chained(metadata: Any) -> None:
            hook(metadata)
            if previous is not None:
                previous(metadata)

        runtime.launch_enter_hook = chained
        try:
            yield
        finally:
            runtime.launch_enter_hook = previous


def _metadata_name(metadata: Any) -> str:
    for getter in (lambda m: m.get("name"), lambda m: m["name"], lambda m: m.name):
        with contextlib.suppress(KeyError, AttributeError, TypeError):
            value = getter(metadata)
            if value:
                return str(value)
    return "?"


ADAPTERS: dict[str, Callable[[], DslAdapter]] = {"triton": TritonAdapter}

# Every DSL a submission may name (the public Atrex-Bench's prompts name these, FlyDSL
# aside: ROCm only, docs/evaluator.md), and those this evaluator can attribute kernels of
# (an adapter above). A release accepts the supported ones unless it says otherwise; an
# admin may accept a known one before its adapter exists (its jobs then say why they fail).
DSL_LABELS = {"triton": "Triton", "gluon": "Gluon", "cute": "CuTe DSL"}
KNOWN_DSLS = tuple(DSL_LABELS)
SUPPORTED_DSLS = tuple(name for name in KNOWN_DSLS if name in ADAPTERS)


def unavailable_reason(dsl: str, device: str) -> str | None:
    """Why this host cannot evaluate candidates in `dsl`; None when it can. Said for the
    job instead of a crash, or of a verdict from an adapter that does not know the DSL."""
    if dsl not in DSL_LABELS:
        return f"unknown DSL {dsl!r} (known: {', '.join(KNOWN_DSLS)})"
    if dsl in ADAPTERS:
        return None
    label = DSL_LABELS[dsl]
    if dsl == "gluon" and device == "cpu":
        return (f"this host cannot evaluate {label}: its kernels need a GPU (Triton's "
                "interpreter cannot run them)")
    if dsl == "cute" and importlib.util.find_spec("cutlass") is None:
        return f"this host cannot evaluate {label}: nvidia-cutlass-dsl is not installed here"
    return (f"this host cannot evaluate {label} yet: the evaluator has no adapter that "
            "attributes its kernels")


def adapter_for(dsl: str) -> DslAdapter:
    try:
        return ADAPTERS[dsl]()
    except KeyError:
        raise ValueError(f"unsupported DSL {dsl!r} (supported: {', '.join(ADAPTERS)})") from None
