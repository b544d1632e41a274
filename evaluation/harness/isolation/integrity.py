"""Integrity of the harness inside the child: has the candidate replaced what we rely on?

The candidate runs in the same process as the child's harness code (input creation,
output transfer, timing, the profiler), so it can monkeypatch any of it: the clock, CUDA
events and synchronize, the profiler, torch.save, Triton's launch path, the harness's own
functions. The child takes a fingerprint of all of those before it imports the candidate
and compares after every request that ran candidate code; any difference fails the shape
with the names that changed, and the child is not used again.

A patch that a candidate applies and undoes inside one call of its own forward cannot
touch the harness's calls around it; one that persists between calls is found at the next
check. What this cannot see (a change below Python, in C memory) the physical tripwire
and the parent's own checks still face.
"""

from __future__ import annotations

import builtins
import gc
import json
import os
import random
import secrets
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.library
import torch.testing
from torch.utils._python_dispatch import TorchDispatchMode

Fingerprint = dict[str, tuple[int, int]]

# Objects whose attributes the harness calls; every callable attribute is fingerprinted.
_NAMESPACES: tuple[tuple[str, Any], ...] = (
    ("time", time), ("json", json), ("os", os),
    ("torch", torch), ("torch.Tensor", torch.Tensor), ("torch.cuda", torch.cuda),
    ("torch.profiler", torch.profiler), ("torch.autograd.profiler", torch.autograd.profiler),
    ("torch.cuda.Event", torch.cuda.Event), ("torch.cuda.Stream", torch.cuda.Stream),
    ("torch.cuda.CUDAGraph", torch.cuda.CUDAGraph), ("torch.testing", torch.testing),
    ("TorchDispatchMode", TorchDispatchMode),
    # Where seeds and random picks come from, and the interpreter's own functions (open,
    # __import__, ...): a candidate that pins these steers what it is given.
    ("secrets", secrets), ("random", random), ("random.Random", random.Random),
    ("builtins", builtins), ("torch.random", torch.random), ("numpy.random", np.random),
    # Profiler records as the timing and adoption code read them.
    *((("_KinetoEvent", torch._C._autograd._KinetoEvent),)
      if hasattr(torch._C._autograd, "_KinetoEvent") else ()),
)
# Objects the input draw relies on that are not callables themselves: the generators seeded
# before every draw (a stand-in whose manual_seed does nothing pins the contents).
_OBJECTS: tuple[tuple[str, Callable[[], object]], ...] = (
    ("torch.random.default_generator", lambda: vars(torch.random).get("default_generator")),
    ("torch.cuda.default_generators", lambda: torch.cuda.default_generators),
    ("numpy.random.mtrand._rand", lambda: getattr(np.random.mtrand, "_rand", None)),
)
# Attributes known to be replaced lawfully at run time (lazy initialisation inside torch).
_LAZY = frozenset({"torch.cuda._lazy_seed_tracker", "torch.cuda._initialized"})


def fingerprint(extra_modules: Iterable[str] = (),
                extra_classes: Iterable[tuple[str, type]] = ()) -> Fingerprint:
    """Identity of every callable the harness relies on, and of its code object."""
    result: Fingerprint = {}
    for key, space, attr in _entries(extra_modules, extra_classes):
        value = _lookup(space, attr)
        result[key] = (id(value), id(getattr(value, "__code__", None)))
    for label, get in _OBJECTS:
        result[label] = (id(get()), 0)
    return result


class FingerprintWatch:
    """The fingerprint taken once, then compared fast (between two timed calls: ~1 ms for
    the whole fingerprint if rebuilt, a fraction of that here)."""

    def __init__(self, extra_modules: Iterable[str] = (),
                 extra_classes: Iterable[tuple[str, type]] = ()) -> None:
        # per entry: the namespace that holds it, the namespaces that would shadow it (the
        # classes before its owner along the MRO), its identity and its code's
        self._entries: list[tuple[str, Mapping[str, Any], tuple[Mapping[str, Any], ...], str,
                                  int, int]] = []
        for key, space, attr in _entries(extra_modules, extra_classes):
            spaces = [vars(k) for k in space.__mro__] if isinstance(space, type) else [vars(space)]
            at = next((i for i, d in enumerate(spaces) if attr in d), 0)
            value = spaces[at].get(attr)
            code = getattr(value, "__code__", None)
            self._entries.append((key, spaces[at], tuple(spaces[:at]), attr, id(value),
                                  0 if code is None else id(code)))
        self._objects = [(label, get, id(get())) for label, get in _OBJECTS]

    def changed(self) -> list[str]:
        # (a function's code is compared only while the function itself is the same one)
        found = [key for key, owner, shadows, attr, ident, code in self._entries
                 if id(value := owner.get(attr)) != ident
                 or (code and id(value.__code__) != code)  # type: ignore[union-attr]
                 or (shadows and any(attr in d for d in shadows))]
        found += [label for label, get, ident in self._objects if id(get()) != ident]
        return found


def _lookup(space: object, attr: str) -> object:
    """What `space.attr` finds, without calling descriptors: a module's own attribute, or the
    first class along a class's MRO that defines it (so an attribute set on torch.Tensor
    that shadows torch._C.TensorBase's method is a change, not a new name)."""
    if isinstance(space, type):
        for klass in space.__mro__:
            if attr in klass.__dict__:
                return klass.__dict__[attr]
        return None
    return vars(space).get(attr)


def _entries(extra_modules: Iterable[str],
             extra_classes: Iterable[tuple[str, type]]) -> list[tuple[str, object, str]]:
    """(name, the namespace it lives in, attribute) of every callable the harness relies on."""
    spaces = [*_NAMESPACES, *extra_classes]
    for name in _harness_modules(extra_modules):
        module = sys.modules[name]
        spaces.append((name, module))
        # The methods of the harness's own classes (ChildRuntime.emit, the recorders, ...).
        spaces += [(f"{name}.{attr}", value) for attr, value in vars(module).items()
                   if isinstance(value, type) and value.__module__ == name]
    entries = []
    for label, space in spaces:
        for attr, _ in _callables(space):
            key = f"{label}.{attr}"
            if key not in _LAZY:
                entries.append((key, space, attr))
    return entries


def changed(before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]) -> list[str]:
    """Names replaced, or removed, since `before` (new attributes are not the harness's)."""
    return sorted(name for name, ident in before.items() if after.get(name) != ident)


def _harness_modules(extra: Iterable[str]) -> list[str]:
    package = __name__.rsplit(".", 2)[0]  # evaluation.harness (this is its isolation room)
    names = [n for n in list(sys.modules) if n == package or n.startswith(package + ".")]
    names += [n for n in extra if n in sys.modules]
    return sorted(set(names))


def _callables(space: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(space, type):  # its bases' attributes too, but object's
        items = {attr: value for klass in reversed(space.__mro__[:-1])
                 for attr, value in vars(klass).items()}.items()
    elif isinstance(space, types.ModuleType):
        items = vars(space).items()
    else:
        items = {}.items()
    for attr, value in list(items):
        if attr.startswith("__") and attr not in ("__torch_function__", "__init__", "__call__"):
            continue
        if isinstance(value, types.ModuleType):
            continue
        if callable(value) or isinstance(value, staticmethod | classmethod | property):
            yield attr, value


# -- hooks: places where code of the candidate's can run while the harness works -------------
#
# The fingerprint above says whether what the harness calls is still ours. A hook is the
# other way in: code the candidate leaves registered with the interpreter, torch or Triton,
# which then runs inside the harness's own calls (a dispatch mode that sees the timing
# buffers refilled, an operator registration that does the work in `copy_`, a trace
# function, a signal handler, a gc callback). None of them is used by the harness between
# candidate calls, so the state at bind (before the candidate is imported) is the state the
# child must be in whenever the harness works.

HookState = dict[str, object]

# Interpreter events that add a hook nobody can remove or list afterwards.
_AUDIT_TRIPWIRES = frozenset({"sys.addaudithook", "sys.monitoring.register_callback"})
_audit_seen: list[str] = []


def install_audit_tripwire() -> None:
    """Record every later attempt to add an audit hook (an audit hook runs on file opens,
    imports and ctypes calls, the harness's included), and count library loads and imports
    (code_loaded_since). Called once, before the candidate.

    An installed library that adds one while it is imported (on the H200, importing
    Liger-Kernel's ops under Python 3.12 did) is not the candidate's doing: it is recorded
    apart (library_import_hook) and allowed."""
    trust_library_roots()

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event in _AUDIT_TRIPWIRES:
            if library_import_hook(sys._getframe(1), args) is None:
                _audit_seen.append(event)
        elif event in ("ctypes.dlopen", "import"):
            _loads[0] += 1  # a new shared object may be mapped now: child_core._installed looks
    sys.addaudithook(hook)


def library_import_hook(frame: types.FrameType | None, args: tuple[object, ...] = ()) -> str | None:
    """The installed library that is adding a hook from `frame`, when it does so while one
    of its modules is being imported; else None (the hook counts as the candidate's).

    Three conditions, each one the candidate cannot meet with code of its own: the adding
    frame's file, and the file of any function handed over (`args`, as
    sys.monitoring.register_callback passes its callback), belong to an installed
    distribution and are not writable from the child (the sandbox mounts the Python install
    read-only; the candidate's files and its scratch space are writable or its own); and a
    module body of such a library lies on the stack above it (an import, not a library
    function the candidate called with a callback of its own)."""
    if frame is None:
        return None
    library = _read_only_library_file(frame.f_code.co_filename)
    if library is None:
        return None
    for value in args:
        code = getattr(value, "__code__", None)
        if code is not None and _read_only_library_file(code.co_filename) is None:
            return None
    caller: types.FrameType | None = frame
    while caller is not None:
        if caller.f_code.co_name == "<module>" and _read_only_library_file(
                caller.f_code.co_filename) is not None:
            return library
        caller = caller.f_back
    return None


_LIBRARY_INDEX: list[Any] = []
# Where installed libraries live, taken before the candidate runs (trust_library_roots), not
# from sys.path as the candidate may have changed it: a read-only file of its own named six.py
# in a folder it put on sys.path would otherwise pass for the six distribution's.
_TRUSTED_ROOTS: list[Path] = []


def trust_library_roots() -> None:
    """Fix the folders installed libraries are read from, once, before the candidate: the
    Python install's site folders and the import path the harness gave the child (the
    deployment's library folders among it), those the child cannot write (the sandbox mounts
    them read-only; the work area and scratch space are writable, so never trusted)."""
    import site
    import sysconfig

    from ..libraries import library_paths

    paths = sysconfig.get_paths()
    found = [paths.get("purelib"), paths.get("platlib"), *site.getsitepackages(), *sys.path]
    roots = [Path(p).resolve() for p in found if p and Path(p).is_dir()] + library_paths()
    _TRUSTED_ROOTS[:] = [r for r in dict.fromkeys(roots) if not writable(str(r))]
    _LIBRARY_INDEX.clear()
    _FINDER_LIBRARY.clear()


def writable(path: str) -> bool:
    return os.access(path, os.W_OK)


def _read_only_library_file(path: str) -> str | None:
    """"package version" when `path` is a file of a distribution installed in a trusted
    library folder (trust_library_roots) that the child cannot write, else None."""
    if not path or path.startswith("<") or not _TRUSTED_ROOTS or writable(path):
        return None
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError):
        return None
    if not any(root in resolved.parents for root in _TRUSTED_ROOTS):
        return None
    if not _LIBRARY_INDEX:
        from ..libraries import LibraryIndex
        _LIBRARY_INDEX.append(LibraryIndex(roots=[str(r) for r in _TRUSTED_ROOTS]))
    return _LIBRARY_INDEX[0].of_file(path)  # type: ignore[no-any-return]


def _import_hooks() -> tuple[int, ...]:
    """sys.meta_path's finders but those an installed library defines (its import put them
    there; a finder class of the standard library's, or of the candidate's, counts)."""
    kept = []
    for finder in sys.meta_path:
        kind = finder if isinstance(finder, type) else type(finder)
        module = sys.modules.get(getattr(kind, "__module__", "") or "")
        source = getattr(module, "__file__", None) or ""
        if _finder_library(source) is None:
            kept.append(_ident(finder))
    return tuple(kept)


_FINDER_LIBRARY: dict[str, str | None] = {}


def _finder_library(source: str) -> str | None:
    if source not in _FINDER_LIBRARY:
        _FINDER_LIBRARY[source] = _read_only_library_file(source)
    return _FINDER_LIBRARY[source]


def hook_state() -> HookState:
    """The cheap part, taken before every timed call's contents are drawn (microseconds)."""
    state: HookState = {
        "a torch dispatch mode": torch._C._len_torch_dispatch_stack(),
        # torch.set_default_device is one too: the harness says where its tensors go
        "a torch function mode": torch._C._len_torch_function_stack(),
        "a trace function (sys.settrace)": _ident(sys.gettrace()),
        "a profile function (sys.setprofile)": _ident(sys.getprofile()),
        "a trace function for threads (threading.settrace)": _ident(threading.gettrace()),
        "a profile function for threads (threading.setprofile)": _ident(threading.getprofile()),
        "an audit hook": len(_audit_seen),
        "a garbage-collector callback (gc.callbacks)": tuple(_ident(c) for c in gc.callbacks),
        "an import hook (sys.meta_path)": _import_hooks(),
        "a path hook (sys.path_hooks)": tuple(_ident(f) for f in sys.path_hooks),
        "sys.excepthook": _ident(sys.excepthook),
        "sys.unraisablehook": _ident(sys.unraisablehook),
        "threading.excepthook": _ident(threading.excepthook),
        "a signal handler": tuple((int(s), _ident(signal.getsignal(s))) for s in _SIGNALS),
        "an interval timer": tuple(signal.getitimer(t) != (0.0, 0.0) for t in _TIMERS),
    }
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:  # Python 3.12: tools that see every call and line
        state["a sys.monitoring tool"] = tuple(monitoring.get_tool(i) for i in range(6))
    knobs = sys.modules.get("triton.knobs")
    runtime = getattr(knobs, "runtime", None)
    if runtime is not None:  # launch and compile hooks run inside the harness's launches
        for name in ("launch_enter_hook", "launch_exit_hook", "jit_cache_hook",
                     "jit_post_compile_hook", "kernel_load_start_hook", "kernel_load_end_hook",
                     "kernel_unload_hook"):
            state[f"triton.knobs.runtime.{name}"] = _chain_ident(getattr(runtime, name, None))
    for module_name in _HARNESS_KERNEL_MODULES:  # pre-run hooks on the harness's own kernels
        module = sys.modules.get(module_name)
        for attr, value in (vars(module).items() if module is not None else ()):
            hooks = getattr(value, "pre_run_hooks", None)
            if attr.startswith("_atrex") and isinstance(hooks, list):
                state[f"a pre-run hook on {attr}"] = len(hooks)
    return state


class RegistrationWatch:
    """Kernels registered for operators that existed before the candidate was imported.

    A registration (torch.library's `impl`, or C++ in a library the candidate loads) can
    replace what `aten::copy_` or `aten::normal_` does for the harness's own calls (its
    draws, copies and comparisons are aten operators). torch itself registers lazily too,
    but not for aten: torch.compile adds kernels for prims, inductor and c10d operators
    (88 of them on the CPU, none aten). Meta kernels never run on real tensors."""

    def __init__(self) -> None:
        self._impls = frozenset(torch.library._impls)
        self._count = len(self._impls)
        self._ops = frozenset(n for n in torch._C._dispatch_get_all_op_names()
                              if n.startswith("aten::"))
        self._tables = _dispatch_tables(self._ops)

    def python_overrides(self) -> list[str]:
        """torch.library registrations on operators that existed (cheap: between calls)."""
        if len(torch.library._impls) == self._count:
            return []
        found = []
        for entry in set(torch.library._impls) - self._impls:
            namespace, _, rest = entry.partition("/")
            op, _, key = rest.rpartition("/")
            if f"{namespace}::{op}" in self._ops and key != "Meta":
                found.append(f"a kernel registered for {namespace}::{op} ({key})")
        return sorted(found)

    def tables_changed(self) -> list[str]:
        """aten operators whose dispatch table changed (~35 ms for all of them: after a
        library was loaded or a module imported, and after every request)."""
        now = _dispatch_tables(self._ops)
        return [f"a kernel registered for {name}" for name, table in self._tables.items()
                if now.get(name) != table]


def _dispatch_tables(ops: Iterable[str]) -> dict[str, int]:
    return {name: hash(torch._C._dispatch_dump(name)) for name in ops}


def hooks_changed(before: Mapping[str, object], after: Mapping[str, object]) -> list[str]:
    return sorted(name for name, value in before.items() if after.get(name) != value)


def _ident(value: object) -> int:
    return 0 if value is None else id(value)


def _chain_ident(value: object) -> object:
    """A Triton hook, or the hooks of a HookChain (one object whose `calls` list grows)."""
    calls = getattr(value, "calls", None)
    return tuple(_ident(c) for c in calls) if isinstance(calls, list) else _ident(value)


_SIGNALS = tuple(s for s in signal.valid_signals()
                 if s not in (signal.SIGKILL, signal.SIGSTOP))
_TIMERS = (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)
_HARNESS_KERNEL_MODULES = ("evaluation.harness.timing",)


def mapped_libraries() -> frozenset[str]:
    """Shared objects mapped into this process: a new one may register operators from C++."""
    found: set[str] = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.rstrip("\n").split(None, 5)
                if len(fields) == 6 and ".so" in fields[5]:
                    found.add(fields[5])
    except OSError:
        return frozenset()
    return frozenset(found)


def code_loaded_since(mark: int) -> bool:
    """Whether a library was loaded or a module imported since `loaded_mark()` said `mark`."""
    return _loads[0] != mark


def loaded_mark() -> int:
    return _loads[0]


_loads = [0]  # ctypes.dlopen and import events seen by the audit tripwire
