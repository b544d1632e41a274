"""One call's outputs, child -> parent, in a form the parent bounds before it reads a byte.

The file is raw tensor bytes, one tensor after another, each contiguous; the layout (role,
name, dtype, shape of each tensor) travels in the child's event. No pickle, no zip records,
nothing compressed: the parent works out the size every tensor must have from what it
already holds (the reference's outputs, the inputs it made itself), refuses any layout
that differs from those, refuses a file whose size is not exactly their sum, and only then
reads exactly that many bytes. The parent's memory for one call is bounded by the size of
the expected outputs plus the inputs the candidate may have changed, whatever the child
writes (an earlier torch.load of the child's file inflated a 2 MB file to 2 GiB).

Imports no Django.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import torch

OUTPUT = "output"
INPUT = "input"  # an input the call changed
MAX_TENSORS = 256


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


def write_call_file(handle: BinaryIO, outputs: Mapping[str, torch.Tensor],
                    modified_inputs: Mapping[str, torch.Tensor]) -> list[list[Any]]:
    """Write the tensors' bytes to `handle` (child side); the layout for the event."""
    layout: list[list[Any]] = []
    for role, tensors in ((OUTPUT, outputs), (INPUT, modified_inputs)):
        for name, tensor in tensors.items():
            data = host_copy(tensor.detach())
            layout.append(TensorLayout(role, name, str(data.dtype), tuple(data.shape)).to_wire())
            if data.numel():
                handle.write(data.reshape(-1).view(torch.uint8).numpy().data)
    return layout


def host_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous copy in host memory; from a GPU, into page-locked memory (torch's caching
    host allocator reuses it), which the copy engine fills several times faster than
    pageable memory. Where page-locked memory cannot be had, an ordinary copy."""
    if tensor.device.type != "cuda":
        return tensor.contiguous()
    try:
        host = torch.empty(tuple(tensor.shape), dtype=tensor.dtype, pin_memory=True)
    except RuntimeError:
        return tensor.to("cpu").contiguous()
    host.copy_(tensor)  # waits for the copy: the bytes are there when this returns
    return host


def _host_buffer(total: int, device: torch.device) -> torch.Tensor:
    """Where an output file is read to: page-locked when it goes on to a GPU."""
    if device.type == "cuda":
        try:
            return torch.empty(total, dtype=torch.uint8, pin_memory=True)
        except RuntimeError:
            pass
    return torch.empty(total, dtype=torch.uint8)


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


def read_call_file(handle: io.BufferedIOBase, layout: Sequence[tuple[TensorLayout, torch.dtype]],
                   device: torch.device) -> CallTensors:
    """Exactly the declared bytes, refused when the file holds more or fewer."""
    sizes = [_nbytes(dtype, entry.shape) for entry, dtype in layout]
    total = sum(sizes)
    actual = os.fstat(handle.fileno()).st_size
    if actual != total:
        raise LayoutRefused(f"the output file holds {actual} bytes; the outputs it declares "
                            f"take {total}")
    buffer = _host_buffer(total, device)
    view = buffer.numpy().data
    filled = 0
    while filled < total:
        got = handle.readinto(view[filled:])
        if not got:
            raise LayoutRefused("the output file ended before the declared outputs")
        filled += got
    result = CallTensors({}, {})
    offset = 0
    for (entry, dtype), size in zip(layout, sizes, strict=True):
        part = buffer[offset:offset + size]
        if offset % max(1, torch.empty((), dtype=dtype).element_size()):
            part = part.clone()  # a view as a wider dtype must start on its alignment
        tensor = part.view(dtype).reshape(entry.shape).to(device)
        offset += size
        target = result.outputs if entry.role == OUTPUT else result.modified_inputs
        target[entry.name] = tensor
    return result
