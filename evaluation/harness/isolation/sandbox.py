"""The sandbox: how the candidate's process is isolated, and what this host allows of it.

The process itself is child_process.py's (spawn, bind, kill, a pool started ahead), the
requests to it channel.py's.

Isolation, applied where the host allows (each part is reported, never silently assumed):
- a private root (jail.py): the child sees its work folder, the Python install, the
  harness and the GPU devices, nothing else of the host: no checkout, no `.git`, no
  release files, no other child's folder, no Unix socket of a local server;
- as root: an unprivileged uid (setpriv; any uid, with or without a passwd entry), no
  network (new network namespace), its own PID namespace whose first process is a trusted
  root shell that dies with the worker (parent-death signal), taking every process of the
  candidate with it;
- work folders made without following links (workarea.py), owned by root except the
  child's own home, temp and output folders; swept when a killed worker left them;
- a scrubbed environment (an allowlist of GPU-stack variables);
- a seccomp filter (syscall_filter.py) that denies what no kernel needs;
- a memory and a process limit per evaluation, enforced by a control group of the child's
  own where the host has one (limits.py): memory counts tmpfs pages too;
- everything the child can write on size-capped tmpfs mounts: its folder (work, home,
  outputs, caches, logs) on one of its own, /tmp and /dev/shm on small private ones;
- resource limits (processes, file size, CPU time, core dumps; address space on the CPU
  only, since CUDA reserves huge virtual ranges) and wall timeouts on every request.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import jail
from .limits import hierarchy

# Variables that say where the GPU stack lives; nothing else of the parent's environment
# reaches the candidate.
PASSED_ENV = ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
              "TRITON_LIBCUDA_PATH", "TRITON_PTXAS_PATH", "NVIDIA_VISIBLE_DEVICES",
              "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _share_of_memory(cap_gib: int, share: float = 0.5) -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return cap_gib * 1024**3
    return min(cap_gib * 1024**3, int(total * share)) // 2**20 * 2**20  # whole MiB


def _half_of_memory(cap_gib: int) -> int:
    return _share_of_memory(cap_gib, 0.5)


def _id_from_env(name: str, default: int) -> int:
    """A uid/gid for the child from the worker's environment (one per worker slot)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 0 < int(raw) < 2**31:
        raise ValueError(f"{name}={raw!r}: expected a positive numeric id")
    return int(raw)


@dataclass(frozen=True)
class SandboxSettings:
    isolate: bool = True
    # As root the child runs as this uid/gid (default nobody). Several workers on one host
    # (one per GPU) should each have their own: work folders are 0700 and owned by the
    # child, and RLIMIT_NPROC counts per uid, so separate ids keep concurrent candidates
    # out of each other's files and process budgets (docs/operations.md).
    child_uid: int = field(default_factory=lambda: _id_from_env("ATREX_SANDBOX_UID", 65534))
    child_gid: int = field(default_factory=lambda: _id_from_env("ATREX_SANDBOX_GID", 65534))
    # CPU children only (CUDA reserves far more address space than it uses): at most half of
    # this host's memory, so one candidate cannot take the worker down with it.
    cpu_address_space_bytes: int | None = field(default_factory=lambda: _half_of_memory(32))
    # Per evaluation where a control group can be made (limits.py), else per uid (rlimit).
    max_processes: int = 1024
    # The child's memory, tmpfs pages included, where a control group can be made.
    memory_bytes: int = field(default_factory=lambda: _half_of_memory(32))
    # The child's own folder (work, home, Triton's cache, logs): one tmpfs this size.
    scratch_bytes: int = field(default_factory=lambda: _share_of_memory(8, 1 / 16))
    # The shared memory area the child hands its outputs over in (output_area.py): up to a
    # request's calls at once, three checked timed calls' (the public block_scaled_mm
    # returns 4.9 GB on one shape) or five trials'. With the scratch folder a quarter of
    # the host's memory, up to 32 GiB, so that with RLIMIT_AS (half) a CPU child without a
    # control group still leaves the host a quarter.
    output_bytes: int = field(default_factory=lambda: _share_of_memory(24, 3 / 16))
    # The private /tmp and /dev/shm inside the child's root, each this size.
    private_tmpfs_bytes: int = 256 * 1024**2
    max_file_bytes: int = 8 * 1024**3
    # CPU seconds per process of the candidate (RLIMIT_CPU): a backstop beside the wall
    # timeouts, for processes that outlive a request.
    cpu_seconds: int = 6 * 3600
    syscall_filter: bool = field(
        default_factory=lambda: os.environ.get("ATREX_SYSCALL_FILTER", "1") != "0")
    start_timeout_s: float = 180.0
    # Output tensors travel child -> parent as files: memory-backed /dev/shm makes that
    # several times faster than a disk-backed /tmp for the large shapes.
    workdir_base: str | None = None  # None: /dev/shm when it has room, else the temp dir
    # GPU hosts set ATREX_SANDBOX_REQUIRED=1: a host that cannot isolate refuses to evaluate.
    require_isolation: bool = field(
        default_factory=lambda: os.environ.get("ATREX_SANDBOX_REQUIRED", "") == "1")


@dataclass(frozen=True)
class Isolation:
    """What this host allowed; stored with every result."""

    uid: int
    network_namespace: bool
    pid_namespace: bool
    masked_paths: tuple[str, ...]  # hidden folders covered inside the folders the child sees
    env_scrubbed: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)
    private_root: bool = False  # the child sees only what jail.py allows
    syscall_filter: bool = False  # syscall_filter.py installed in the child
    # The limits, and what enforces them: "cgroup v1"/"cgroup v2", or "rlimit" (per uid).
    limits: dict[str, Any] = field(default_factory=dict)


class CandidateError(Exception):
    """The candidate failed a stage (the child reported it)."""

    def __init__(self, stage: str, message: str, traceback: str = "") -> None:
        super().__init__(message)
        self.stage = stage
        self.message = message
        self.traceback = traceback


class ChannelCorrupted(CandidateError):
    """The child's event stream broke the protocol; the child is killed to resynchronise."""


class ChildDied(Exception):
    def __init__(self, returncode: int | None, stderr_tail: str) -> None:
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        super().__init__(describe_exit(returncode))


class ChildTimeout(Exception):
    def __init__(self, seconds: float, stderr_tail: str) -> None:
        self.seconds = seconds
        self.stderr_tail = stderr_tail
        super().__init__(f"no answer within {seconds:.0f} s")


class HarnessError(Exception):
    """The evaluator itself could not run (not the candidate's fault)."""


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "the candidate's process ended"
    if returncode < 0:
        if -returncode == signal.SIGXCPU:
            return "the candidate's process used up its CPU time (RLIMIT_CPU) and was killed " \
                   "by SIGXCPU"
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the candidate's process was killed by {name}"
    return f"the candidate's process exited with code {returncode}"


@functools.cache
def jail_problem() -> str | None:
    """None when this host can build the child's private root (jail.py); else why not.

    The probe builds the same root a child gets and runs `true` in it as an unprivileged uid.
    """
    if os.geteuid() != 0:
        return "not root"
    missing = [tool for tool in ("unshare", "setpriv", "pivot_root", "mount")
               if not shutil.which(tool, path=SAFE_PATH)]
    if missing:
        return "missing " + ", ".join(missing)
    with tempfile.TemporaryDirectory(prefix="atrex-jail-probe-") as folder:
        paths = jail.JailPaths(*(Path(folder) / name for name in ("root", "work", "cache")))
        for path in (paths.mountpoint, paths.workdir, paths.cache_dir):
            path.mkdir()
        plan = jail.mount_plan(readonly=jail.python_install(), masks=(), gpu=False)
        payload = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                   "--no-new-privs", "--", "true"]
        probe = subprocess.run(
            [*_UNSHARE, "/bin/sh", "-c", 'eval "$ATREX_JAIL_SCRIPT"'],
            env={"PATH": SAFE_PATH, "ATREX_JAIL_SCRIPT": jail.script(paths, plan, payload)},
            capture_output=True, timeout=60)
    if probe.returncode != 0:
        return f"the private root could not be built: {probe.stderr.decode(errors='replace')[-300:]}"
    return None


# New mount, network and PID namespaces; the namespace's first process (a root shell that
# builds the private root, then waits for the candidate) gets SIGKILL when unshare dies.
_UNSHARE = ("unshare", "--mount", "--net", "--pid", "--fork", "--kill-child", "--")

# Hidden wherever they fall inside a folder the child sees: every release folder of this
# checkout (their hidden files, and releases other than the job's), var/ (database, broker
# files that carry other teams' candidates and seeds, logs) and the checkout itself.
_PROJECT = Path(__file__).resolve().parents[3]
ALWAYS_MASKED = (_PROJECT / "evaluation" / "releases", _PROJECT / "var", _PROJECT)


def planned_isolation(settings: SandboxSettings, masked: Sequence[Path]) -> Isolation:
    problem = jail_problem() if settings.isolate else "isolation disabled by settings"
    if problem is None:
        plan = _plan(settings, masked, gpu=False)
        covered = tuple(op.target for op in plan if op.kind == "mask")
        groups = hierarchy()
        limits = {"memory_bytes": settings.memory_bytes if groups else None,
                  "max_processes": settings.max_processes,
                  "processes_counted": "per evaluation" if groups else "per uid",
                  "scratch_bytes": settings.scratch_bytes,
                  "output_bytes": settings.output_bytes,
                  "private_tmpfs_bytes": settings.private_tmpfs_bytes,
                  "cpu_seconds": settings.cpu_seconds,
                  "enforced_by": f"cgroup v{groups.version}" if groups else "rlimit"}
        notes = () if groups else (
            "no control group could be made on this host: memory is bounded only by the "
            "tmpfs sizes, the output area (and RLIMIT_AS on the CPU), processes per uid "
            "(RLIMIT_NPROC)",)
        return Isolation(uid=settings.child_uid, network_namespace=True, pid_namespace=True,
                         masked_paths=covered, private_root=True,
                         syscall_filter=settings.syscall_filter, limits=limits, notes=notes)
    if settings.require_isolation:
        raise HarnessError(f"the sandbox is required (ATREX_SANDBOX_REQUIRED) but unavailable: "
                           f"{problem}")
    notes = (f"no sandbox ({problem}): the child runs as the parent's user, with network, "
             "and sees the parent's filesystem",)
    return Isolation(uid=os.geteuid(), network_namespace=False, pid_namespace=False,
                     masked_paths=(), notes=notes)


def _plan(settings: SandboxSettings, masked: Sequence[Path], *, gpu: bool) -> list[jail.Op]:
    masks = [Path(p) for p in masked] + [p for p in ALWAYS_MASKED if p.is_dir()]
    return jail.mount_plan(readonly=jail.python_install(), masks=masks, gpu=gpu,
                           devices=jail.gpu_devices() if gpu else (),
                           tmpfs_bytes=settings.private_tmpfs_bytes)


def workdir_base(settings: SandboxSettings) -> Path:
    """Where this worker's work area goes: the settings' folder, else /dev/shm when it has
    room, else the temp folder."""
    if settings.workdir_base is not None:
        return Path(settings.workdir_base)
    shm = "/dev/shm"
    try:
        stats = os.statvfs(shm)
    except OSError:
        return Path(tempfile.gettempdir())
    roomy = stats.f_bavail * stats.f_frsize >= 8 * 1024**3
    return Path(shm) if roomy and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
