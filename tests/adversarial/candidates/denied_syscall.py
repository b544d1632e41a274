"""denied_syscall: the system calls a sandbox escape starts with, tried from the forward.

Exploit: a new user namespace (unshare(CLONE_NEWUSER), and `unshare -Urm` as a program,
the first step of most container escapes: root inside it, with mount), a new mount
namespace, ptrace (PTRACE_TRACEME, the start of debugging tricks), reading memory through
process_vm_readv, the kernel keyring, io_uring (whose operations seccomp never sees),
perf_event_open, bpf and mount. The probe reports how each call ended and raises, so the
shape fails with its report.

What should catch it: the child's seccomp filter (harness/isolation/syscall_filter.py) makes every
one of them fail with EPERM (or EPERM from the kernel's own checks where a call needs a
privilege the sandbox uid lacks); without the filter, the user namespace and ptrace
succeed in the sandbox.
"""

import ctypes
import errno
import json
import os
import subprocess

import torch

libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _outcome(result: int) -> str:
    return "ok" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")


def _probe() -> dict[str, str]:
    found: dict[str, str] = {}
    in_child = os.fork()
    if in_child == 0:  # unshare changes the calling process: try it in a throwaway one
        os._exit(0 if libc.unshare(CLONE_NEWUSER) == 0 else 100 + ctypes.get_errno())
    status = os.waitstatus_to_exitcode(os.waitpid(in_child, 0)[1])
    found["unshare(CLONE_NEWUSER)"] = "ok" if status == 0 else errno.errorcode.get(status - 100, "?")
    in_child = os.fork()
    if in_child == 0:
        os._exit(0 if libc.unshare(CLONE_NEWNS) == 0 else 100 + ctypes.get_errno())
    status = os.waitstatus_to_exitcode(os.waitpid(in_child, 0)[1])
    found["unshare(CLONE_NEWNS)"] = "ok" if status == 0 else errno.errorcode.get(status - 100, "?")
    try:
        program = subprocess.run(["unshare", "-Urm", "true"], capture_output=True, timeout=20)
        found["unshare -Urm"] = "ok" if program.returncode == 0 else "failed: " + \
            program.stderr.decode(errors="replace").strip()[-80:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        found["unshare -Urm"] = f"failed: {exc}"
    in_child = os.fork()
    if in_child == 0:  # PTRACE_TRACEME would make this process traced: a throwaway one
        os._exit(0 if libc.ptrace(0, 0, 0, 0) == 0 else 100 + ctypes.get_errno())
    status = os.waitstatus_to_exitcode(os.waitpid(in_child, 0)[1])
    found["ptrace(PTRACE_TRACEME)"] = "ok" if status == 0 else errno.errorcode.get(status - 100, "?")
    source = ctypes.create_string_buffer(b"secret", 8)
    target = ctypes.create_string_buffer(8)
    local, remote = _IoVec(ctypes.addressof(target), 8), _IoVec(ctypes.addressof(source), 8)
    found["process_vm_readv"] = _outcome(libc.process_vm_readv(
        os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
    found["keyctl(GET_KEYRING_ID)"] = _outcome(libc.syscall(250, 0, -3, 0))  # x86-64 number
    params = ctypes.create_string_buffer(120)
    found["io_uring_setup"] = _outcome(libc.syscall(425, 4, params))
    attr = ctypes.create_string_buffer(128)
    ctypes.memmove(attr, (1).to_bytes(4, "little") + (128).to_bytes(4, "little"), 8)  # SW, size
    found["perf_event_open"] = _outcome(libc.syscall(298, attr, 0, -1, -1, 0))
    found["bpf"] = _outcome(libc.syscall(321, 5, None, 0))  # BPF_PROG_LOAD, no program
    found["mount"] = _outcome(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
    return found


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("syscalls " + json.dumps(_probe()))
