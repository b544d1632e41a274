"""One call's outputs, child -> parent, through a shared memory area the parent sizes and seals.

The parent makes the area when it starts a child: a memfd of `SandboxSettings.output_bytes`,
sealed so that nobody can shrink or grow it (a child that truncated memory the parent has
mapped would kill the parent with SIGBUS), handed to the child as a descriptor. Pages are
only taken when written, and stay for the child's life, so the next call writes into pages
that exist already: no file, no page allocation, no copy through read/write system calls
(on the H200 the file this replaced cost ~100 ms for a 151 MB output, the copy engine's
share of it ~6 ms: benchmarks/transfer_cost.py, handoff_probe.py).

The child writes one call's tensors as raw bytes, one after another, each on an ALIGN
boundary, the call itself on a page boundary, from offset 0 at the start of each request;
the layout (role, name, dtype, shape of each tensor) and the call's offset travel in the
child's event. No pickle, nothing compressed: the parent works out the size every tensor
must have from what it already holds (the reference's outputs, the inputs it made itself),
refuses any layout that differs from those and any offset outside the area, places the
tensors itself from the layout, and copies exactly those bytes out of the area (onto its
device, or into memory of its own on a CPU) before it looks at them: the child may still
be writing to the area, and what is judged is the parent's copy. The parent's memory for
one call is bounded by the size of the expected outputs plus the inputs the candidate may
have changed, whatever the child writes (an earlier torch.load of the child's file
inflated a 2 MB file to 2 GiB).

A checked timed call is handed over: the child waits after writing it until the parent has
judged it (stages/performance._TimedCallJudge), so the candidate's next call cannot rewrite it first.
Where the parent cannot run the reference beside the child's memory (large shapes), it
`take`s a copy of the declared bytes then, bounded by the area, and punches a copy of
RELEASE_BYTES or more out of the area so the host's memory does not double.

Imports no Django.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

OUTPUT = "output"
INPUT = "input"  # an input the call changed
MAX_TENSORS = 256
ALIGN = 64  # every tensor of a call starts on this boundary: a view as any dtype is aligned
CALL_ALIGN = mmap.PAGESIZE
GROWTH_BYTES = 64 * 2**20  # the least a mapping grows by
# A call taken at its hand-over that is at least this large is punched out of the area once
# the parent has its copy: its pages go back, so the copy does not double the host memory the
# call takes (a smaller one keeps its pages for the next request, which writes into them
# without page faults).
RELEASE_BYTES = 256 * 2**20
PIN_BYTES = 2 * 2**30  # the largest mapping page-locked (_Mapping)
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02


@dataclass(frozen=True)
class TensorLayout:
    role: str
    name: str
    dtype: str  # str(torch.dtype), e.g. "torch.float16"
    shape: tuple[int, ...]

    def to_wire(self) -> list[Any]:
        return [self.role, self.name, self.dtype, list(self.shape)]


@dataclass(frozen=True)
class CallTensors:
    outputs: dict[str, torch.Tensor]
    modified_inputs: dict[str, torch.Tensor]


def _nbytes(dtype: torch.dtype, shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count * torch.empty((), dtype=dtype).element_size()


class LayoutRefused(ValueError):
    """The child's file or layout is not what the parent expects; the message says why."""


def _parse(raw: object) -> list[TensorLayout]:
    if not isinstance(raw, list) or len(raw) > MAX_TENSORS:
        raise LayoutRefused("the result channel sent a malformed output layout")
    parsed: list[TensorLayout] = []
    for entry in raw:
        if not (isinstance(entry, list) and len(entry) == 4 and entry[0] in (OUTPUT, INPUT)
                and isinstance(entry[1], str) and isinstance(entry[2], str)
                and isinstance(entry[3], list) and len(entry[3]) <= 16
                and all(type(s) is int and 0 <= s < 2**48 for s in entry[3])):
            raise LayoutRefused("the result channel sent a malformed output layout")
        parsed.append(TensorLayout(entry[0], entry[1], entry[2], tuple(entry[3])))
    return parsed


def check_layout(raw: object, expected_outputs: Mapping[str, torch.Tensor],
                 inputs: Mapping[str, Any]) -> list[tuple[TensorLayout, torch.dtype]]:
    """The declared layout, each entry with the dtype it must have; LayoutRefused when it
    names anything the parent did not expect (the messages are the comparison's own)."""
    layout = _parse(raw)
    declared = [t for t in layout if t.role == OUTPUT]
    names = [t.name for t in declared]
    if len(set(names)) != len(names) or set(names) != set(expected_outputs):
        raise LayoutRefused(f"output keys {sorted(set(names))} differ from the reference's "
                            f"{sorted(expected_outputs)}")
    checked: list[tuple[TensorLayout, torch.dtype]] = []
    changed: set[str] = set()
    for entry in layout:
        like: object
        if entry.role == OUTPUT:
            like = expected_outputs[entry.name]
            what = f"output '{entry.name}'"
        else:
            like = inputs.get(entry.name)
            if not isinstance(like, torch.Tensor) or entry.name in changed:
                raise LayoutRefused("the result channel reported a changed input that is "
                                    "not a tensor input of the call")
            changed.add(entry.name)
            what = f"input '{entry.name}'"
        assert isinstance(like, torch.Tensor)
        if entry.shape != tuple(like.shape):
            raise LayoutRefused(f"{what} has shape {entry.shape}, expected {tuple(like.shape)}")
        if entry.dtype != str(like.dtype):
            raise LayoutRefused(f"{what} has dtype {entry.dtype}, expected {like.dtype}")
        checked.append((entry, like.dtype))
    return checked


def placement(layout: Sequence[tuple[TensorLayout, torch.dtype]]) -> tuple[list[int], int]:
    """Where each tensor of a call starts, relative to the call, and the bytes the call
    spans: both sides derive them from the layout alone."""
    offsets, end = [], 0
    for entry, dtype in layout:
        start = _aligned(end, ALIGN)
        offsets.append(start)
        end = start + _nbytes(dtype, entry.shape)
    return offsets, end


def _dtype(name: str) -> torch.dtype:
    """A torch dtype from its str() ("torch.float16"); ValueError for anything else."""
    found = getattr(torch, name.removeprefix("torch."), None) if name.startswith("torch.") \
        else None
    if not isinstance(found, torch.dtype):
        raise ValueError(f"not a dtype: {name[:40]!r}")
    return found


def _punch(fd: int, offset: int, length: int) -> None:
    """Give a range's pages back (it reads as zeros after); where the kernel cannot, keep them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    libc.fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length)


def _as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor's elements in order, as bytes, moved by copies only: a non-contiguous one
    through its storage's bytes, gathered on the host. (On a GPU, `.contiguous()` would be a
    kernel between two timed calls, which the device accounting allows the harness none of.)"""
    if tensor.is_contiguous():
        return tensor.contiguous().reshape(-1).view(torch.uint8)
    storage = torch.empty(tensor.untyped_storage().nbytes(), dtype=torch.uint8)
    storage.untyped_storage().copy_(tensor.untyped_storage())
    elements = storage.view(tensor.dtype)
    gathered = elements.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())
    return gathered.contiguous().reshape(-1).view(torch.uint8)


def _aligned(value: int, boundary: int) -> int:
    return -(-value // boundary) * boundary


class _Mapping:
    """A growing shared mapping of the area's first bytes: mapped once, re-mapped larger
    only when a call reaches past it (each side keeps one for the child's life).

    With `pin` (a CUDA device on that side) a mapping of up to PIN_BYTES is registered as
    page-locked memory, so the copy engine moves a call between the device and the area
    directly: on the H200 device-to-host into pageable memory ran at 1.4-15 GB/s, into
    page-locked ~53 GB/s (benchmarks/transfer_cost.py). Registering faults the mapping's
    pages in on the side that registers; a larger mapping stays pageable, so a punched call
    gives its pages back at once (`OutputArea.take`)."""

    def __init__(self, fd: int, nbytes: int, pin: bool = False) -> None:
        self.fd, self.nbytes, self.pin = fd, nbytes, pin
        self._map: mmap.mmap | None = None
        self._view: torch.Tensor | None = None
        self.pinned = False

    def bytes(self, start: int, length: int) -> torch.Tensor:
        end = start + length
        if self._view is None or end > self._view.numel():
            size = min(self.nbytes, max(_aligned(end, mmap.PAGESIZE), 2 * self.mapped,
                                        GROWTH_BYTES))
            self._unpin()
            self._view = None  # the old mapping goes once nothing views it
            self._map = mmap.mmap(self.fd, size, mmap.MAP_SHARED,
                                  mmap.PROT_READ | mmap.PROT_WRITE)
            self._view = torch.frombuffer(self._map, dtype=torch.uint8)
            if self.pin and size <= PIN_BYTES:
                self.pinned = _register(self._view)
        return self._view[start:end]

    @property
    def mapped(self) -> int:
        return 0 if self._view is None else self._view.numel()

    def _unpin(self) -> None:
        if self.pinned and self._view is not None:
            torch.cuda.cudart().cudaHostUnregister(self._view.data_ptr())
        self.pinned = False

    def close(self) -> None:
        self._unpin()
        self._view = None
        self._map = None


def _register(view: torch.Tensor) -> bool:
    """Page-lock a mapping for the copy engine; False (left pageable) where CUDA refuses."""
    try:
        error = torch.cuda.cudart().cudaHostRegister(view.data_ptr(), view.numel(), 0)
    except (RuntimeError, AttributeError, TypeError):
        return False
    return int(error) == 0


class OutputArea:
    """The parent's side: makes the sealed area and reads calls out of it."""

    def __init__(self, nbytes: int, pin: bool = False) -> None:
        self.nbytes = _aligned(max(nbytes, mmap.PAGESIZE), mmap.PAGESIZE)
        self.fd = os.memfd_create("atrex-outputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.fd, self.nbytes)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        except OSError:
            os.close(self.fd)
            raise
        self._mapping = _Mapping(self.fd, self.nbytes, pin)
        self._taken: dict[int, torch.Tensor] = {}  # offset -> the parent's copy of the call

    def take(self, offset: object, raw_layout: object) -> None:
        """Copy a call the child has handed over, while it waits, to judge it later: the
        bytes its layout declares (checked against what the parent expects only when the call
        is read), at most to the end of the area. Only for shapes whose reference cannot run
        beside the child's memory (evaluate.py, one side at a time); elsewhere a handed-over
        call is judged at once, its layout checked before a byte is read. A malformed
        announcement copies nothing; reading that call is then refused."""
        try:
            parsed = _parse(raw_layout)
            _, span = placement([(entry, _dtype(entry.dtype)) for entry in parsed])
        except (LayoutRefused, ValueError):
            return
        if type(offset) is int and offset >= 0 and offset % CALL_ALIGN == 0 \
                and offset + span <= self.nbytes:
            self._taken[offset] = self._mapping.bytes(offset, span).clone()
            if span >= RELEASE_BYTES:
                _punch(self.fd, offset, span)

    def forget_taken(self) -> None:
        """A new request: the last one's calls have all been judged."""
        self._taken.clear()

    def read_call(self, offset: object, layout: Sequence[tuple[TensorLayout, torch.dtype]],
                  device: torch.device, taken: bool = False) -> CallTensors:
        """The declared tensors of the call at `offset`, copied out of the area (or out of
        the copy `take` made of it)."""
        starts, span = placement(layout)
        if type(offset) is not int or offset < 0 or offset % CALL_ALIGN \
                or offset + span > self.nbytes:
            raise LayoutRefused("the result channel placed a call's outputs outside the "
                                "output area")
        if taken:
            region = self._taken.get(offset)
            if region is None or region.numel() < span:
                raise LayoutRefused("the result channel reported outputs the child did not "
                                    "hand over")
        else:
            region = self._mapping.bytes(offset, span)
        result = CallTensors({}, {})
        for (entry, dtype), start in zip(layout, starts, strict=True):
            part = region[start:start + _nbytes(dtype, entry.shape)]
            # a copy of the parent's own, on its device: the child may still write the area
            tensor = part.view(dtype).reshape(entry.shape).to(device, copy=True)
            target = result.outputs if entry.role == OUTPUT else result.modified_inputs
            target[entry.name] = tensor
        return result

    def close(self) -> None:
        self._taken.clear()
        self._mapping.close()
        os.close(self.fd)


class AreaFull(RuntimeError):
    """A call's outputs do not fit in what is left of the output area."""


class AreaWriter:
    """The child's side: writes each call after the previous one, from 0 each request."""

    def __init__(self, fd: int, nbytes: int, pin: bool = False) -> None:
        self.nbytes = nbytes
        self._mapping = _Mapping(fd, nbytes, pin)
        self._next = 0

    def start_request(self) -> None:
        """The parent has judged every call of the last request: its bytes may go."""
        self._next = 0

    def write_call(self, outputs: Mapping[str, torch.Tensor],
                   modified_inputs: Mapping[str, torch.Tensor]) -> tuple[int, list[list[Any]]]:
        """Copy the tensors into the area; their offset and the layout for the event."""
        tensors = [(role, name, tensor.detach()) for role, group in
                   ((OUTPUT, outputs), (INPUT, modified_inputs)) for name, tensor in group.items()]
        layout = [TensorLayout(role, name, str(t.dtype), tuple(t.shape)) for role, name, t in
                  tensors]
        starts, span = placement([(entry, t.dtype) for entry, (_, _, t) in
                                  zip(layout, tensors, strict=True)])
        offset = _aligned(self._next, CALL_ALIGN)
        if offset + span > self.nbytes:
            raise AreaFull(f"the outputs ({span / 2**20:.0f} MiB) do not fit in the sandbox's "
                           f"output area ({self.nbytes / 2**20:.0f} MiB, "
                           f"{max(0, self.nbytes - offset) / 2**20:.0f} MiB left in this "
                           "request)")
        region = self._mapping.bytes(offset, span)
        for (_, _, tensor), start in zip(tensors, starts, strict=True):
            if tensor.numel():
                flat = _as_bytes(tensor)
                region[start:start + flat.numel()].copy_(flat)
        self._next = offset + span
        return offset, [entry.to_wire() for entry in layout]
