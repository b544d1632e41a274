"""A seccomp filter for the sandboxed child: system calls no kernel evaluation needs fail.

Installed by child_main.py before the harness imports anything else, so the candidate and
every process it starts run under it (a filter is inherited across fork and exec and can
never be removed). The filter is classic BPF built here and loaded with prctl/seccomp
through ctypes: nothing to install on a CPU machine or the GPU host.

Denied with EPERM: debugging other processes (ptrace, process_vm_*, pidfd_getfd),
namespaces (unshare, setns, clone with a CLONE_NEW* flag), the mount API old and new,
chroot/pivot_root, bpf, perf_event_open, the kernel keyring, kexec and kernel modules,
io_uring (its operations bypass seccomp), userfaultfd, swap, quotas, accounting, the
system clocks, reboot, iopl/ioperm, file handles (open_by_handle_at walks around the
mount namespace), syslog. clone3 answers ENOSYS: its flags sit behind a pointer BPF
cannot read, and glibc then falls back to clone, which the filter can inspect. A call
from another ABI (i386 or x32 on x86-64) kills the process: its numbers would dodge the
table.

Imports no Django.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
import threading

# seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8*i (the low word first, little endian)
_ARCH_OFFSET, _NR_OFFSET, _ARG0_LOW = 4, 0, 16
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_JSET_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1

_NAMESPACE_FLAGS = (0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
                    | 0x20000000 | 0x40000000)  # CLONE_NEWNS, CGROUP, UTS, IPC, USER, PID, NET

DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "unshare", "setns",
          "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
          "fsconfig", "fsmount", "fspick", "mount_setattr", "bpf", "perf_event_open", "keyctl",
          "add_key", "request_key", "kexec_load", "kexec_file_load", "init_module",
          "finit_module", "delete_module", "io_uring_setup", "io_uring_enter",
          "io_uring_register", "userfaultfd", "swapon", "swapoff", "quotactl", "acct",
          "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "reboot", "iopl",
          "ioperm", "open_by_handle_at", "name_to_handle_at", "syslog", "vhangup",
          "lookup_dcookie")

# (AUDIT_ARCH_*, syscall numbers): from the kernel's unistd tables.
_X86_64 = (0xC000003E, {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155,
    "chroot": 161, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "bpf": 321, "perf_event_open": 298,
    "keyctl": 250, "add_key": 248, "request_key": 249, "kexec_load": 246,
    "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "userfaultfd": 323, "swapon": 167, "swapoff": 168, "quotactl": 179, "acct": 163,
    "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
    "reboot": 169, "iopl": 172, "ioperm": 173, "open_by_handle_at": 304,
    "name_to_handle_at": 303, "syslog": 103, "vhangup": 153, "lookup_dcookie": 212,
    "clone": 56, "clone3": 435, "seccomp": 317,
})
_AARCH64 = (0xC00000B7, {
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438,
    "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "mount_setattr": 442, "bpf": 280, "perf_event_open": 241, "keyctl": 219,
    "add_key": 217, "request_key": 218, "kexec_load": 104, "kexec_file_load": 294,
    "init_module": 105, "finit_module": 273, "delete_module": 106, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "userfaultfd": 282, "swapon": 224,
    "swapoff": 225, "quotactl": 60, "acct": 89, "settimeofday": 170, "clock_settime": 112,
    "clock_adjtime": 266, "adjtimex": 171, "reboot": 142, "open_by_handle_at": 265,
    "name_to_handle_at": 264, "syslog": 116, "vhangup": 58, "lookup_dcookie": 18,
    "clone": 220, "clone3": 435, "seccomp": 277,
})
_TABLES = {"x86_64": _X86_64, "aarch64": _AARCH64, "arm64": _AARCH64}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes:
    """The filter for this machine's architecture, as packed sock_filter instructions."""
    arch, numbers = _TABLES[machine or platform.machine()]
    denied = [numbers[name] for name in DENIED if name in numbers]
    code = [_insn(_BPF_LD_W_ABS, _ARCH_OFFSET),
            _insn(_BPF_JEQ_K, arch, jt=1),
            _insn(_BPF_RET_K, _RET_KILL_PROCESS),
            _insn(_BPF_LD_W_ABS, _NR_OFFSET)]
    if arch == _X86_64[0]:  # x32 numbers carry bit 30
        code += [_insn(_BPF_JGE_K, 0x40000000, jf=1), _insn(_BPF_RET_K, _RET_KILL_PROCESS)]
    # The checks jump forward to the returns after them (a jump of k lands k + 1 ahead):
    #   n denied checks, clone3, clone | ALLOW, EPERM, ENOSYS | clone: LD arg0, JSET, ALLOW, EPERM
    n = len(denied)
    eperm, enosys, clone_args = n + 3, n + 4, n + 5  # ALLOW sits at n + 2
    for index, number in enumerate(denied):
        code.append(_insn(_BPF_JEQ_K, number, jt=eperm - index - 1))
    code.append(_insn(_BPF_JEQ_K, numbers["clone3"], jt=enosys - n - 1))
    code.append(_insn(_BPF_JEQ_K, numbers["clone"], jt=clone_args - (n + 1) - 1))
    code += [_insn(_BPF_RET_K, _RET_ALLOW),
             _insn(_BPF_RET_K, _RET_ERRNO | errno.EPERM),
             _insn(_BPF_RET_K, _RET_ERRNO | errno.ENOSYS),
             _insn(_BPF_LD_W_ABS, _ARG0_LOW),
             _insn(_BPF_JSET_K, _NAMESPACE_FLAGS, jt=1),
             _insn(_BPF_RET_K, _RET_ALLOW),
             _insn(_BPF_RET_K, _RET_ERRNO | errno.EPERM)]
    return b"".join(code)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> None:
    """Load the filter into this process and all its threads; OSError if the kernel refuses."""
    machine = platform.machine()
    if machine not in _TABLES:
        raise OSError(errno.ENOSYS, f"no system call table for {machine}")
    code = program(machine)
    buffer = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    flags = _SECCOMP_FILTER_FLAG_TSYNC if threading.active_count() > 1 else 0
    number = _TABLES[machine][1]["seccomp"]
    if libc.syscall(ctypes.c_long(number), ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
                    ctypes.c_uint(flags), ctypes.byref(prog)) != 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER) failed")
