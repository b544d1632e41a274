"""Per-DSL launch recording, behind one small interface.

Adoption detection needs two things from a DSL: which of its kernels the candidate's own
source launched (to credit their device time), and when a launch is in progress (ops the
DSL runtime itself dispatches belong to the launch, not to the candidate). One adapter per
runtime: `TritonAdapter` sees Triton and Gluon launches (both go through Triton's
JITFunction; a Gluon kernel is a GluonJITFunction), `CuteAdapter` sees CuTe DSL's. A child
observes with the declared DSL's adapter and Triton's, so a kernel of another DSL from the
candidate's own file is seen and named ("other DSL: triton") instead of credited. Adding
FlyDSL means adding one adapter here; the stages do not change.

Runs inside the sandboxed child.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from .libraries import LibraryIndex


@functools.cache
def shared_library_index() -> LibraryIndex:
    """One per process: the installed packages do not change while a child runs."""
    return LibraryIndex()


@dataclass
class LaunchRecorder:
    """Collects DSL launches; `depth` > 0 while a launch runs on this thread."""

    own_files: frozenset[str]
    dsl: str = "triton"  # the declared DSL: only its kernels are the candidate's own
    own_kernels: set[str] = field(default_factory=set)
    own_launches: int = 0
    foreign_launches: list[str] = field(default_factory=list)
    # kernels of another DSL launched from the candidate's own source: name -> that DSL
    other_dsl_kernels: dict[str, str] = field(default_factory=dict)
    other_dsl_launches: int = 0
    # kernels of an installed library (libraries.py): name -> "package version"
    library_kernels: dict[str, str] = field(default_factory=dict)
    library_launches: int = 0
    libraries: LibraryIndex = field(default_factory=shared_library_index)
    _local: threading.local = field(default_factory=threading.local)

    @property
    def depth(self) -> int:
        return getattr(self._local, "depth", 0)

    def enter(self) -> None:
        self._local.depth = self.depth + 1

    def leave(self) -> None:
        self._local.depth = self.depth - 1

    def launched(self, name: str, source_file: str | None, dsl: str | None = None) -> None:
        """A launch of a `dsl` kernel (the declared one unless said) that completed.
        Launches that raised, and `warmup` compilations, are not counted: a kernel that
        fails on purpose before torch does the work (or is only compiled, never run) must
        not count as the candidate's own work. A kernel from an installed package's files,
        or launched by one (code it generated), is that library's."""
        if source_file not in self.own_files:
            library = self.libraries.of_file(source_file) or self.libraries.launcher(
                sys._getframe(1), self.own_files)
            if library is None:
                self.foreign_launches.append(name)
            else:
                self.library_kernels[name] = library
                self.library_launches += 1
        elif (dsl or self.dsl) == self.dsl:
            self.own_kernels.add(name)
            self.own_launches += 1
        else:
            self.other_dsl_kernels[name] = dsl or "?"
            self.other_dsl_launches += 1


def credit_compiled(recorder: LaunchRecorder, compiled: dict[str, str | None],
                    device_names: set[str]) -> None:
    """Device kernels the candidate's own source compiled ahead (`compiled_kernels`) are its
    own, in the declared DSL, whichever compiled program ran them. On an H200 the CuTe DSL
    executor that ran a public rms_norm shape's kernel was told another layout's symbol when
    it loaded (1 shape of 56): the names the DSL emitted are the evidence, as the device
    reports them."""
    for name in device_names:
        if name not in recorder.own_kernels and compiled.get(name) in recorder.own_files:
            recorder.own_kernels.add(name)


def launch_names(recorder: LaunchRecorder) -> set[str]:
    """Every kernel the recorder saw launched: the candidate's own, its other-DSL ones,
    libraries' and foreign ones."""
    return set(recorder.own_kernels) | set(recorder.foreign_launches) | set(
        recorder.other_dsl_kernels) | set(recorder.library_kernels)



class DslAdapter(Protocol):
    name: str

    def prepare(self) -> None:
        """Import the DSL's runtime before the first candidate needs it."""

    def recording(self, recorder: LaunchRecorder) -> contextlib.AbstractContextManager[None]:
        """While active, report every launch of this DSL to `recorder`."""

    def compiled_kernels(self) -> dict[str, str | None]:
        """Kernels compiled ahead of their launch, by the name the device runs them under,
        with the file of the function they came from (CuTe DSL's; Triton's are named by
        their launches)."""

    def guarded_modules(self) -> list[str]:
        """Modules of the DSL's runtime a candidate must not patch (integrity check)."""

    def guarded_classes(self) -> list[tuple[str, type]]:
        """Classes of the DSL's runtime a candidate must not patch (integrity check)."""


class TritonAdapter:
    """Triton and Gluon: wrap JITFunction.run (GPU) and InterpretedFunction.run
    (TRITON_INTERPRET=1).

    `kernel[grid](...)` and the autotuner both end in `.run`, so wrapping it sees every
    launch and brackets it. A `@gluon.jit` kernel is a GluonJITFunction (a JITFunction that
    compiles Gluon's IR) and is reported as Gluon, a plain `@triton.jit` one as Triton: a
    "Gluon" file whose work runs in plain Triton kernels is not native Gluon, nor a Triton
    file with Gluon kernels native Triton. On a GPU, Inductor launches compiled kernels
    without `.run`; Triton's launch-enter hook catches those (it does not fire in the
    interpreter).
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

    def compiled_kernels(self) -> dict[str, str | None]:
        return {}

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
            recorder.launched(getattr(fn, "__name__", "?"), code.co_filename if code else None,
                              triton_dialect(self))
        return result

    cls.run = run  # type: ignore[attr-defined]
    try:
        yield
    finally:
        cls.run = original  # type: ignore[attr-defined]


def triton_dialect(kernel: Any) -> str:
    """"gluon" for a `@gluon.jit` kernel, "triton" for any other JITFunction."""
    try:
        from triton.experimental.gluon._runtime import GluonJITFunction
    except ImportError:  # a Triton without Gluon, or one that moved it: ask the kernel
        is_gluon = getattr(kernel, "is_gluon", None)
        return "gluon" if callable(is_gluon) and is_gluon() is True else "triton"
    return "gluon" if isinstance(kernel, GluonJITFunction) else "triton"


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
        # The others are a compiled kernel launched directly: Inductor's, or a library's
        # that caches its compiled kernels (FlagGems' LibEntry launches them without
        # `.run` after the first call), found by the frames that launched it.
        if recorder.depth == 0:
            recorder.launched(_metadata_name(metadata), None)

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
    # A compiled kernel's launch hands the hook Triton's LazyDict: its `data` holds the name
    # (its `get()` would also run the kernel's launch_metadata function, which is not ours
    # to run). On the H200 the name read as "?" without this, and FlagGems' kernels were
    # called fallback-torch.
    for getter in (lambda m: m.data["name"], lambda m: m.get("name"), lambda m: m["name"],
                   lambda m: m.name):
        with contextlib.suppress(KeyError, AttributeError, TypeError):
            value = getter(metadata)
            if value:
                return str(value)
    return "?"


class CuteAdapter:
    """CuTe DSL (nvidia-cutlass-dsl): credit the kernels the candidate's own source compiled.

    A `@cute.kernel` function is traced when the `@cute.jit` function that launches it is
    compiled (`cute.compile`, or its first call): its kernel generator (made by
    `BaseDSL.kernel_launcher`) returns the kernel symbol the device will run,
    `kernel_cutlass_<function>_<argument types>_<n>`, and the kernel function's file says
    whose it is. The compiled program (a JitExecutor) is given its kernels' symbols when it
    loads them (`update_jit_cuda_modules`); running it (`run_compiled_program`, behind both
    `executor(...)` and a plain call of the jit function) is the launch. The two
    compile-time hooks stay in place from `prepare` (a candidate may compile when it is
    imported); the run is wrapped while recording. `KernelLauncher.launch` itself is not
    wrapped: it takes its caller's frame for the kernel body's names. Written against
    nvidia-cutlass-dsl 4.2.1.
    """

    name = "cute"

    def __init__(self) -> None:
        self._symbol_files: dict[str, str | None] = {}  # kernel symbol -> its function's file
        self._executor_symbols: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = \
            weakref.WeakKeyDictionary()

    def prepare(self) -> None:
        import cutlass.cute  # noqa: F401 - the import itself is most of the preparation
        from cutlass.base_dsl.dsl import BaseDSL
        from cutlass.base_dsl.jit_executor import JitExecutor

        symbol_files, executor_symbols = self._symbol_files, self._executor_symbols
        make_launcher = BaseDSL.kernel_launcher
        load_modules = JitExecutor.update_jit_cuda_modules

        def kernel_launcher(dsl: Any, *args: Any, **kwargs: Any) -> Any:
            decorate = make_launcher(dsl, *args, **kwargs)

            def decorator(body: Any) -> Any:
                generate = decorate(body)
                # the kernel function, or the DSL's one-call wrapper of it (DSLCallable)
                code = getattr(getattr(body, "func", body), "__code__", None)

                @functools.wraps(generate)
                def generate_named(*a: Any, **k: Any) -> Any:
                    result = generate(*a, **k)
                    if isinstance(result, tuple) and len(result) == 2:
                        symbol_files[str(result[1])] = code.co_filename if code else None
                    return result

                return generate_named

            return decorator

        def loaded(executor: Any, kernel_symbols: Any) -> Any:
            result = load_modules(executor, kernel_symbols)
            executor_symbols[result] = tuple(str(k) for k in kernel_symbols)
            return result

        BaseDSL.kernel_launcher = kernel_launcher
        JitExecutor.update_jit_cuda_modules = loaded

    @contextlib.contextmanager
    def recording(self, recorder: LaunchRecorder) -> Iterator[None]:
        from cutlass.base_dsl.jit_executor import JitExecutor

        original = JitExecutor.run_compiled_program
        symbol_files, executor_symbols = self._symbol_files, self._executor_symbols

        def run(executor: Any, *args: Any, **kwargs: Any) -> Any:
            recorder.enter()
            try:
                result = original(executor, *args, **kwargs)
            finally:
                recorder.leave()
            for symbol in executor_symbols.get(executor, ()):
                recorder.launched(symbol, symbol_files.get(symbol), "cute")
            return result

        JitExecutor.run_compiled_program = run
        try:
            yield
        finally:
            JitExecutor.run_compiled_program = original

    def compiled_kernels(self) -> dict[str, str | None]:
        return dict(self._symbol_files)

    def guarded_modules(self) -> list[str]:
        return ["cutlass.base_dsl.jit_executor"]

    def guarded_classes(self) -> list[tuple[str, type]]:
        from cutlass.base_dsl.dsl import BaseDSL
        from cutlass.base_dsl.jit_executor import JitExecutor
        from cutlass.cutlass_dsl.cutlass import KernelLauncher

        return [("cutlass.JitExecutor", JitExecutor), ("cutlass.KernelLauncher", KernelLauncher),
                ("cutlass.BaseDSL", BaseDSL)]


class Observers:
    """What a child records with: the declared DSL's adapter and, where it is another, Triton's
    (always installed): a Triton or Gluon kernel in a CuTe DSL file is then seen as the
    candidate's, in another DSL. CuTe DSL kernels in a Triton or Gluon file are known by the
    names the DSL gives them (adoption.py), without importing the DSL in every child."""

    def __init__(self, dsl: str) -> None:
        self.name = dsl
        own = ADAPTERS[dsl]()
        self.adapters: list[DslAdapter] = [own]
        if not isinstance(own, TritonAdapter):
            self.adapters.append(TritonAdapter())

    def prepare(self) -> None:
        for adapter in self.adapters:
            adapter.prepare()

    @contextlib.contextmanager
    def recording(self, recorder: LaunchRecorder) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for adapter in self.adapters:
                stack.enter_context(adapter.recording(recorder))
            yield

    def compiled_kernels(self) -> dict[str, str | None]:
        return {name: path for adapter in self.adapters
                for name, path in adapter.compiled_kernels().items()}

    def guarded_modules(self) -> list[str]:
        return [m for adapter in self.adapters for m in adapter.guarded_modules()]

    def guarded_classes(self) -> list[tuple[str, type]]:
        return [c for adapter in self.adapters for c in adapter.guarded_classes()]


ADAPTERS: dict[str, Callable[[], DslAdapter]] = {
    "triton": TritonAdapter, "gluon": TritonAdapter, "cute": CuteAdapter}

# Every DSL a submission may name (the public Atrex-Bench's prompts name these four), and
# those this evaluator can attribute kernels of (an adapter above; FlyDSL has none: it is
# ROCm only and has never run here, docs/evaluator.md). A release accepts the supported
# ones unless it says otherwise; an admin may accept a known one before its adapter exists
# (its jobs then say why they fail).
DSL_LABELS = {"triton": "Triton", "gluon": "Gluon", "cute": "CuTe DSL", "flydsl": "FlyDSL"}
KNOWN_DSLS = tuple(DSL_LABELS)
SUPPORTED_DSLS = tuple(name for name in KNOWN_DSLS if name in ADAPTERS)


def unavailable_reason(dsl: str, device: str) -> str | None:
    """Why this host cannot evaluate candidates in `dsl`; None when it can. Said for the
    job instead of a crash, or of a verdict from an adapter that does not know the DSL."""
    if dsl not in DSL_LABELS:
        return f"unknown DSL {dsl!r} (known: {', '.join(KNOWN_DSLS)})"
    label = DSL_LABELS[dsl]
    if dsl not in ADAPTERS:
        return (f"this host cannot evaluate {label} yet: the evaluator has no adapter that "
                "attributes its kernels")
    if dsl == "gluon" and device == "cpu":
        return (f"this host cannot evaluate {label}: its kernels need a GPU (Triton's "
                "interpreter cannot run them)")
    if dsl == "cute" and device == "cpu":
        return f"this host cannot evaluate {label}: its kernels need an NVIDIA GPU"
    if dsl == "cute" and importlib.util.find_spec("cutlass") is None:
        return f"this host cannot evaluate {label}: nvidia-cutlass-dsl is not installed here"
    return None


def adapter_for(dsl: str) -> DslAdapter:
    if dsl not in ADAPTERS:
        raise ValueError(f"unsupported DSL {dsl!r} (supported: {', '.join(ADAPTERS)})")
    return Observers(dsl)
