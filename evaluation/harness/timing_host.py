"""The timing process's own machinery around the samples: the timing thread pinned to its
core, the profiler's CUPTI callbacks detached before the unprofiled samples, the persisting
L2 reset before each sample. Each is looked up where the process already has it; none is
required (timing.py reports what it used).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch


@contextlib.contextmanager
def pinned_thread(pin: bool) -> Iterator[None]:
    """The calling thread on the core it is on now, while it samples (restored after)."""
    cpu = _current_cpu() if pin else None
    if cpu is None:
        yield
        return
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})  # pid 0: this thread alone
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def _current_cpu() -> int | None:
    try:
        cpu = int(ctypes.CDLL(None).sched_getcpu())
    except (OSError, AttributeError):
        return None
    return cpu if cpu >= 0 and cpu in os.sched_getaffinity(0) else None


def detach_profiler() -> bool:
    """cuptiFinalize in the CUPTI the profiler loaded: its callbacks stay subscribed after
    a session and tax every later kernel launch (kineto leaves CUPTI attached where CUDA
    graphs are used); the next session attaches it again. False where none is loaded."""
    function = _shared_function("libcupti.so", "cuptiFinalize")
    if function is None:
        return False
    torch.cuda.synchronize()
    return int(function()) == 0


def _shared_function(library_name: str, symbol: str) -> Any:
    """A function of a shared library already mapped into this process, or None."""
    library = None
    with contextlib.suppress(OSError), open("/proc/self/maps") as maps:
        for line in maps:
            if library_name in line:
                library = line.split()[-1]
                break
    if library is None:
        return None
    try:
        function = getattr(ctypes.CDLL(library), symbol)
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int
    return function


def persisting_l2_resetter() -> Callable[[], None] | None:
    """cudaCtxResetPersistingL2Cache from the CUDA runtime torch loaded, if we can find it."""
    function = _shared_function("libcudart.so", "cudaCtxResetPersistingL2Cache")
    if function is None:
        return None

    def reset() -> None:
        function()

    return reset
