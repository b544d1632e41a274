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

import json
import os
import sys
import time
import types
from collections.abc import Iterable, Mapping
from typing import Any

import torch
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
    # Profiler records as the timing and adoption code read them.
    *((("_KinetoEvent", torch._C._autograd._KinetoEvent),)
      if hasattr(torch._C._autograd, "_KinetoEvent") else ()),
)
# Attributes known to be replaced lawfully at run time (lazy initialisation inside torch).
_LAZY = frozenset({"torch.cuda._lazy_seed_tracker", "torch.cuda._initialized"})


def fingerprint(extra_modules: Iterable[str] = (),
                extra_classes: Iterable[tuple[str, type]] = ()) -> Fingerprint:
    """Identity of every callable the harness relies on, and of its code object."""
    result: Fingerprint = {}
    spaces = [*_NAMESPACES, *extra_classes]
    for name in _harness_modules(extra_modules):
        module = sys.modules[name]
        spaces.append((name, module))
        # The methods of the harness's own classes (ChildRuntime.emit, the recorders, ...).
        spaces += [(f"{name}.{attr}", value) for attr, value in vars(module).items()
                   if isinstance(value, type) and value.__module__ == name]
    for label, space in spaces:
        for attr, value in _callables(space):
            key = f"{label}.{attr}"
            if key not in _LAZY:
                result[key] = (id(value), id(getattr(value, "__code__", None)))
    return result


def changed(before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]) -> list[str]:
    """Names replaced, or removed, since `before` (new attributes are not the harness's)."""
    return sorted(name for name, ident in before.items() if after.get(name) != ident)


def _harness_modules(extra: Iterable[str]) -> list[str]:
    package = __name__.rpartition(".")[0]  # evaluation.harness
    names = [n for n in list(sys.modules) if n == package or n.startswith(package + ".")]
    names += [n for n in extra if n in sys.modules]
    return sorted(set(names))


def _callables(space: Any) -> Iterable[tuple[str, Any]]:
    items = vars(space).items() if isinstance(space, type | types.ModuleType) else ()
    for attr, value in list(items):
        if attr.startswith("__") and attr not in ("__torch_function__", "__init__", "__call__"):
            continue
        if isinstance(value, types.ModuleType):
            continue
        if callable(value) or isinstance(value, staticmethod | classmethod | property):
            yield attr, value
