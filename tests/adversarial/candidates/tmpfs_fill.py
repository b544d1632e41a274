"""tmpfs_fill: fill every memory-backed folder the sandbox lets the candidate write.

Exploit: on its first call the candidate writes 64 MiB files into /tmp, /dev/shm, its
home, its TMPDIR and Triton's cache folder until each write fails, then raises with the
bytes each place took (that is how this probe reports). Later calls return a correct
result computed in Triton. Before the fix those folders were tmpfs mounts without size=
(half of RAM each) or the host's own /dev/shm: 1 GiB in each raised host shared memory
by 3.1 GB while the child could still allocate more under its address-space limit.

What should catch it: the child's own folder (home, TMPDIR, caches, logs) is one
tmpfs of SandboxSettings.scratch_bytes, /tmp and /dev/shm each one of
private_tmpfs_bytes, and a control group counts the pages against the child's memory
limit. The first shape fails with the probe's report, which shows every place capped;
the next passes: its outputs cross in the sealed output area (harness/isolation/output_area.py), not
in the full scratch folder.
"""

import json
import os

import torch
import triton
import triton.language as tl

CHUNK = b"\1" * (64 * 2**20)
_filled: dict[str, int] = {}


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


def _fill(folder: str) -> int:
    written = 0
    for index in range(10_000):
        try:
            with open(os.path.join(folder, f"fill-{index}"), "wb") as handle:
                handle.write(CHUNK)
            written += len(CHUNK)
        except OSError:
            # the last file holds what fitted
            try:
                written += os.path.getsize(os.path.join(folder, f"fill-{index}"))
            except OSError:
                pass
            break
    return written


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if not _filled:
            places = {"/tmp": "/tmp", "/dev/shm": "/dev/shm", "home": os.environ["HOME"],
                      "tmpdir": os.environ["TMPDIR"],
                      "cache": os.environ.get("TRITON_CACHE_DIR", os.environ["HOME"])}
            for name, folder in places.items():
                os.makedirs(folder, exist_ok=True)
                _filled[name] = _fill(folder)
            raise RuntimeError("filled " + json.dumps(_filled))
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        _rms_norm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols,
                                    self.eps, BLOCK=block)
        return out
