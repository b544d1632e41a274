"""output_area_tamper: resize, punch and overwrite the shared output area under the parent.

Exploit: the outputs cross to the trusted parent in a shared memory area the parent has
mapped (harness/isolation/output_area.py). On its first call the candidate finds the area among its
own descriptors (a memfd named "atrex-outputs") and tries what would hurt a parent reading
a mapped file: shrink it to nothing (the parent's next read of the mapping would die of
SIGBUS), grow it past its size (the parent's memory bound) and punch a hole through it
(fallocate); then it raises with what each attempt gave (that is how this probe reports).
From the first timed call of a shape on (its seventh call: five trials and the adoption call
come first), every call fills the area with 0xFF before returning a correct result computed
in Triton: over the checked timed calls saved before, as a cheater would rewrite a checked
timed call whose work it skipped, in a later call the median never sees.

What should catch it: the area is sealed (F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_SEAL) before
the child starts, so the resizes fail with EPERM and the parent's mapping stays whole; a
punched hole only reads back as zeros, in the candidate's own outputs; after saving a checked
timed call the child hands it over and waits until the parent has judged it, so no code of
the candidate runs between the save and the judging. The first shape fails with the probe's
report, the second passes (before the hand-over it failed: its checked timed calls read as
NaN).
"""

import ctypes
import json
import mmap
import os

import torch
import triton
import triton.language as tl

_report: dict[str, str] = {}
_calls: dict[tuple[int, ...], int] = {}  # calls so far, per input shape
FIRST_TIMED_CALL = 6
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * out_stride + cols, (normed * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def _area() -> tuple[int, int] | None:
    for name in os.listdir("/proc/self/fd"):
        try:
            if "atrex-outputs" in os.readlink(f"/proc/self/fd/{name}"):
                fd = int(name)
                return fd, os.fstat(fd).st_size
        except OSError:
            continue
    return None


def _attempt(what) -> str:
    try:
        what()
        return "allowed"
    except OSError as exc:
        return f"refused {exc.strerror}"
    except (ValueError, BufferError) as exc:
        return f"refused {type(exc).__name__}"


def _probe() -> None:
    found = _area()
    if found is None:
        _report["area"] = "not found"
        return
    fd, size = found
    _report["area"] = f"{size} bytes"
    _report["shrink"] = _attempt(lambda: os.ftruncate(fd, 0))
    _report["grow"] = _attempt(lambda: os.ftruncate(fd, size + mmap.PAGESIZE))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]

    def punch() -> None:
        if libc.fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, 0, size) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

    _report["punch"] = _attempt(punch)
    _report["size after"] = str(os.fstat(fd).st_size)


def _scribble() -> None:
    found = _area()
    if found is not None:
        fd, size = found
        length = min(size, 64 * 2**20)
        with mmap.mmap(fd, length, mmap.MAP_SHARED) as area:
            area[:] = b"\xff" * length


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if not _report:
            _probe()
            raise RuntimeError("area " + json.dumps(_report))
        calls = _calls[tuple(x.shape)] = _calls.get(tuple(x.shape), -1) + 1
        if calls >= FIRST_TIMED_CALL:
            _scribble()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        _rms_norm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols,
                                    self.eps, BLOCK=block)
        return out
