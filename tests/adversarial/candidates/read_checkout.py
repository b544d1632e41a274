"""read_checkout: find the portal's checkout from inside the sandbox and read hidden data
through it (git history, tracked files, databases), then send it out in an error message.

Exploit: seen against an earlier sandbox, which covered only the release folders and var/
with tmpfs: a candidate found the checkout through sys.path and the harness's own module
path, ran `git` on it, read a starter tolerance and a shape's W and Q from the history
and sent them back in its error text (1,000 characters per shape). This one tries every
way in: the checkout's path (the cheater read it in the docs; the test fills in
__REPO__), a file the test planted in the checkout (__CANARY__), `git`, the harness's
own folder, and a walk of the whole filesystem for .git folders, roofline and importance
files, release folders and databases. It reports what it found on the first call and
computes honestly afterwards, so the submission still scores.

What should catch it: the child's private root (harness/isolation/jail.py) holds no part of any
checkout except the harness's own code; the hidden files do not exist there.
"""

import json
import os
import subprocess
import sys
import time

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


REPO = "__REPO__"
CANARY = "__CANARY__"
# The files no Python install holds: the release's hidden files, a checkout's history,
# the portal's databases (a release's metadata.json has a name too common to search for).
_NAMES = ("roofline.json", "operator_importance.json", ".git")
_SUFFIXES = (".sqlite3",)
_SKIP = {"proc", "sys", "dev"}
_reported = [False]


def _read(path):
    try:
        with open(path, "rb") as handle:
            return "READ " + repr(handle.read(40))
    except OSError as exc:
        return "denied: " + type(exc).__name__


def _git(folder):
    try:
        done = subprocess.run(["git", "-C", folder, "log", "--oneline", "-1"],
                              capture_output=True, timeout=10, text=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return "failed: " + type(exc).__name__
    return ("ok: " + done.stdout.strip()[:40]) if done.returncode == 0 else "failed: git " \
        + str(done.returncode)


def _walk(budget_s=40.0):
    hits, started = [], time.monotonic()
    for top, dirs, files in os.walk("/"):
        if top == "/":
            dirs[:] = [d for d in dirs if d not in _SKIP]
        # installed packages are public and hold most of the files: walking them filled the
        # time budget on a loaded machine before the rest of the root was seen
        dirs[:] = [d for d in dirs if d not in ("site-packages", "dist-packages", "__pycache__")]
        for name in dirs + files:
            path = os.path.join(top, name)
            if name in _NAMES or name.endswith(_SUFFIXES) \
                    or name.startswith(".atrex-canary") or name in ("atrex-starter", "atrex-fixture"):
                hits.append(path)
        if time.monotonic() - started > budget_s:
            hits.append("(walk cut short)")
            break
    return hits


def _gather():
    harness = os.path.dirname(sys.modules["evaluation"].__path__[0]) \
        if "evaluation" in sys.modules else ""
    try:
        listing = sorted(os.listdir(REPO))
    except OSError as exc:
        listing = "denied: " + type(exc).__name__
    return {
        "canary": _read(CANARY),
        "starter_roofline": _read(REPO + "/evaluation/releases/atrex-starter/data/rms_norm/"
                                  "roofline.json"),
        "repo_listing": listing,
        "git_repo": _git(REPO),
        "git_harness": _git(harness or "/"),
        "hits": _walk()[:12],
    }


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if not _reported[0]:
            _reported[0] = True
            raise RuntimeError("FOUND" + json.dumps(_gather()) + "FOUND")
        return _rms_norm(x, weight, self.eps)
