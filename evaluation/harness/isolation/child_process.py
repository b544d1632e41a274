"""The sandboxed child's process as the parent holds it: spawned isolated (sandbox.py
says how far this host allows), bound to one candidate, restarted lazily after a crash or
a timeout, killed with everything it started; and a pool of children started ahead
(`WarmChildren`). Requests travel over its channel (channel.py).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..release import PUBLIC_FILES, PublicOperator
from . import jail
from .channel import ChildChannel
from .device_memory import CUDA_ALLOCATOR_SETTINGS
from .limits import ChildGroup, hierarchy, sweep_stale_groups
from .output_area import OutputArea
from .sandbox import (
    _UNSHARE,
    PASSED_ENV,
    SAFE_PATH,
    CandidateError,
    ChildDied,
    ChildTimeout,
    HarnessError,
    SandboxSettings,
    _plan,
    planned_isolation,
    workdir_base,
)
from .workarea import make_dir, mount_tmpfs, open_dir, remove_tree, work_area, write_file

CHILD_MAIN = Path(__file__).resolve().parent / "child_main.py"
STDERR_TAIL_CHARS = 3000


class ChildProcess(ChildChannel):
    """One sandboxed child, started generic (warm) and then bound to one candidate.

    A bound child never gets another candidate: code that ran in it could have left
    anything behind. After a crash or a timeout it is restarted lazily and bound again.
    """

    def __init__(self, *, device: str, dsl: str, masked_paths: Sequence[Path],
                 settings: SandboxSettings) -> None:
        self.operator: PublicOperator | None = None
        self.candidate_source = ""
        self._bound = False
        self.device = device
        self.dsl = dsl
        self.settings = settings
        self.masked_paths = tuple(masked_paths)
        self.isolation = planned_isolation(settings, masked_paths)
        self.start_seconds: list[float] = []  # spawn to "ready": imports, CUDA context
        self._process: subprocess.Popen[bytes] | None = None
        self._events_fd: int | None = None
        # A handle on the PID namespace's first process (unshare's child), which outlives
        # unshare by the time it takes to tear down; cleanup waits on it. None without one.
        self._inner_pidfd: int | None = None
        self._buffer = b""
        self._timeout_s = 0.0
        self._request_id = 0
        self._ready = False
        self._started_at = 0.0
        self._owner = (self.isolation.uid, settings.child_gid) \
            if self.isolation.uid != os.geteuid() else None
        # This child's folder in the worker's area (0700, root's): logs the child cannot
        # read, the caches it keeps across restarts, a work folder per process.
        area = work_area(workdir_base(settings))
        self._home = Path(tempfile.mkdtemp(prefix="child-", dir=area.path))
        if self.isolation.private_root:
            # Everything this child can write lives here: on a tmpfs of its own, capped, so
            # that filling it fails the candidate's writes, not the host (seen: 1 GiB in
            # each writable folder raised host shared memory by 3.1 GB).
            try:
                mount_tmpfs(self._home, settings.scratch_bytes)
            except OSError as exc:
                shutil.rmtree(self._home, ignore_errors=True)
                raise HarnessError(f"the child's scratch space could not be mounted: {exc}") \
                    from exc
        self._private = self._home / "logs"
        self._private.mkdir()
        home_fd = open_dir(self._home)
        try:
            os.close(make_dir(home_fd, "cache", 0o700, self._owner))
            os.close(make_dir(home_fd, "root", 0o700))  # the private root's mount point
        finally:
            os.close(home_fd)
        self._cache_dir = self._home / "cache"
        self._spawns = 0
        self.workdir: Path | None = None
        self._workdir_fd: int | None = None
        self._area: OutputArea | None = None  # this process's output area (output_area.py)
        self._group: ChildGroup | None = None
        self._breaches: list[str] = []  # limits hit by processes of this child now gone
        self._processes_at_ready: int | None = None  # in its control group (check_alone)

    @property
    def restarts(self) -> int:
        return max(0, len(self.start_seconds) - 1)

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Spawn now without waiting: the caller's own set-up overlaps the child's imports.

        The first request waits until the child reports it is ready.
        """
        if self._process is None:
            self._started_at = time.monotonic()
            self._spawn()
            self._ready = False

    def bind(self, operator: PublicOperator, candidate_source: str) -> None:
        """Give this child its operator and candidate; sent when the first request comes."""
        if self.operator is not None:
            raise HarnessError("a child process is bound to one candidate only")
        self.operator = operator
        self.candidate_source = candidate_source

    def ensure_started(self) -> None:
        if self._process is None or self._process.poll() is not None:
            if self._process is not None:
                self._cleanup()
            self.start()
        if not self._ready:
            try:
                self._await_ready()
            except HarnessError:
                # Once more, from scratch: a child started ahead may have met the GPU full
                # (seen on an H200: started while the previous candidate held every byte, it
                # could not create its CUDA context); that candidate is gone by now.
                self.start()
                self._await_ready()
        if not self._bound:
            self._send_bind()

    def _send_bind(self) -> None:
        if self.operator is None or self.workdir is None:
            raise HarnessError("bind() a candidate before sending requests")
        assert self._workdir_fd is not None
        # Root's files in root's folder: the child reads them and can plant nothing here.
        operator_fd = make_dir(self._workdir_fd, "operator", 0o755)
        try:
            for name in PUBLIC_FILES:
                write_file(operator_fd, name, (self.operator.directory / name).read_bytes())
        finally:
            os.close(operator_fd)
        write_file(self._workdir_fd, "candidate.py", self.candidate_source.encode("utf-8"))
        self._bound = True
        if self._process is not None:
            _bound_groups.add(self._process.pid)  # start_new_session: its own group
        try:
            self._exchange({"cmd": "bind"}, self.settings.start_timeout_s)
        except CandidateError as exc:
            raise HarnessError(f"binding the candidate failed: {exc.message}\n{exc.traceback}") \
                from exc

    def _await_ready(self) -> None:
        self._timeout_s = self.settings.start_timeout_s
        try:
            event = self._next_event(time.monotonic() + self._timeout_s)
        except (ChildDied, ChildTimeout) as exc:
            tail = getattr(exc, "stderr_tail", "")
            self._cleanup()
            raise HarnessError(f"the sandboxed child did not start: {exc}\n{tail}") from exc
        if event.get("event") != "ready":
            self._cleanup()
            raise HarnessError(f"the sandboxed child did not start: {event}")
        self._ready = True
        # Spawn to ready by the child's own clock reading (CLOCK_MONOTONIC is one clock for
        # the whole host): a child started ahead may have waited long before it was used.
        now = time.monotonic()
        ready_at = event.get("monotonic")
        ready_at = ready_at if isinstance(ready_at, float) and \
            self._started_at <= ready_at <= now else now
        self.start_seconds.append(ready_at - self._started_at)
        if self.isolation.pid_namespace and self._process is not None:
            self._inner_pidfd = _pidfd_of_only_child(self._process.pid)
        self._processes_at_ready = self._group.process_count() if self._group else None

    def close(self) -> None:
        """The child is done with: a bound one is killed at once (it serves no other job, and
        its interpreter's orderly exit took 2.6 s on the job's clock: issue 45), an unbound
        one asked to exit; either way gone, with its folders, when this returns."""
        if not self._bound and self._process is not None and self._process.poll() is None \
                and self._process.stdin:
            try:
                self._process.stdin.write(b'{"cmd": "exit"}\n')
                self._process.stdin.flush()
                self._process.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired, OSError):
                pass
        self._cleanup()
        remove_tree(self._home)

    def kill(self) -> None:
        self._cleanup()

    # -- what it ran into ----------------------------------------------------------------

    def limit_breaches(self) -> list[str]:
        """The per-evaluation limits this child ran into since the last call, in words."""
        notes, self._breaches = self._breaches, []
        if self._group is not None:
            notes += self._group.breaches()
        return notes

    def stderr_tail(self) -> str:
        path = self._private / "stderr.log"
        try:
            with open(path, "rb") as handle:
                handle.seek(max(0, path.stat().st_size - STDERR_TAIL_CHARS))
                return handle.read().decode(errors="replace")
        except OSError:
            return ""

    # -- internals -----------------------------------------------------------------------

    def _spawn(self) -> None:
        self._make_workdir()
        read_fd, write_fd = os.pipe()
        self._area = OutputArea(self.settings.output_bytes, pin=self.device == "cuda")
        env = self._environment(write_fd)
        stdout = open(self._private / "stdout.log", "ab")  # noqa: SIM115 - handed to the child
        stderr = open(self._private / "stderr.log", "ab")  # noqa: SIM115
        groups = hierarchy() if self.isolation.private_root else None
        if groups is not None:
            sweep_stale_groups()
            self._group = ChildGroup.make(groups, memory_bytes=self.settings.memory_bytes,
                                          max_processes=self.settings.max_processes,
                                          tag=str(self._spawns))
            if self._group is None and self.settings.require_isolation:
                raise HarnessError("the child's control group could not be made")
        try:
            self._process = subprocess.Popen(
                self._argv(), cwd=self.workdir, env=env, stdin=subprocess.PIPE, stdout=stdout,
                stderr=stderr, pass_fds=(write_fd, self._area.fd), start_new_session=True,
                preexec_fn=functools.partial(self._limits, os.getpid()),  # noqa: PLW1509
            )
        finally:
            os.close(write_fd)
            stdout.close()
            stderr.close()
        self._events_fd = read_fd
        self._buffer = b""

    def _make_workdir(self) -> None:
        """A fresh folder per process: root's (the parent writes the candidate's files
        there at bind), with the child's own home and temp folders inside."""
        self._spawns += 1
        name = f"work-{self._spawns}"
        home_fd = open_dir(self._home)
        try:
            self._workdir_fd = make_dir(home_fd, name, 0o755)
        finally:
            os.close(home_fd)
        self.workdir = self._home / name
        for folder in ("home", "tmp"):
            os.close(make_dir(self._workdir_fd, folder, 0o700, self._owner))

    def _argv(self) -> list[str]:
        if not self.isolation.private_root:
            return [sys.executable, "-I", "-B", "-X", "faulthandler", str(CHILD_MAIN)]
        # The script travels in the environment of the namespace's first process, which the
        # candidate cannot read (/proc/1/environ is root's), not in its world-readable argv.
        return [*_UNSHARE, "/bin/sh", "-c", 'eval "$ATREX_JAIL_SCRIPT"; exit 125']

    def _jail_script(self) -> str:
        assert self.workdir is not None
        paths = jail.JailPaths(mountpoint=self._home / "root", workdir=self.workdir,
                               cache_dir=self._cache_dir)
        payload = ["setpriv", f"--reuid={self.settings.child_uid}",
                   f"--regid={self.settings.child_gid}", "--clear-groups", "--no-new-privs", "--",
                   sys.executable, "-I", "-B", "-X", "faulthandler", str(jail.CHILD_MAIN_INSIDE)]
        plan = _plan(self.settings, self.masked_paths, gpu=self.device == "cuda")
        return "unset ATREX_JAIL_SCRIPT\n" + jail.script(paths, plan, payload)

    def _environment(self, event_fd: int) -> dict[str, str]:
        assert self.workdir is not None and self._area is not None
        jailed = self.isolation.private_root
        work = jail.WORK if jailed else self.workdir
        cache = jail.CACHE if jailed else self._cache_dir
        user = f"atrex-sandbox-{self.isolation.uid}"
        env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
        env.update({
            "PATH": SAFE_PATH, "HOME": str(work / "home"), "TMPDIR": str(work / "tmp"),
            # getpass.getuser() (torch's cache paths call it) reads these before the passwd
            # database, where a per-worker sandbox uid has no entry.
            "USER": user, "LOGNAME": user,
            "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
            "ATREX_EVENT_FD": str(event_fd), "ATREX_DEVICE": self.device, "ATREX_DSL": self.dsl,
            "ATREX_OUTPUT_FD": str(self._area.fd), "ATREX_OUTPUT_BYTES": str(self._area.nbytes),
            "TRITON_CACHE_DIR": str(cache / "triton"),
            "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
            "XDG_CACHE_HOME": str(cache / "xdg"),
            # torch.compile compiles in this process: Inductor's worker pool would add
            # threads and worker processes, which the child refuses in any candidate.
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
        })
        extra = [str(path) for _, path in jail.dsl_package_paths()]
        if extra:  # child_main.py puts them on sys.path (python -I ignores PYTHONPATH)
            env["ATREX_CHILD_SYS_PATH"] = os.pathsep.join(extra)
        if self.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        else:
            env["PYTORCH_CUDA_ALLOC_CONF"] = CUDA_ALLOCATOR_SETTINGS
        if jailed:
            env["ATREX_JAIL_SCRIPT"] = self._jail_script()
            env["ATREX_PID_NAMESPACE"] = "1"
            if self.settings.syscall_filter:
                env["ATREX_SYSCALL_FILTER"] = "1"
        return env

    def _limits(self, parent: int) -> None:
        """In the forked process, before exec: limits, and death with the worker."""
        # unshare (and through --kill-child the namespace's init, and through it every
        # process of the candidate) gets SIGKILL when the thread that spawned it ends: a
        # worker killed outright leaves no candidate running. The spawning thread must
        # outlive the child (the evaluation's own thread does).
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:  # the worker died before the signal was armed
                os._exit(1)

        def cap(limit: int, value: int) -> None:
            soft, hard = resource.getrlimit(limit)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(limit, (value, value))

        if self._group is not None:
            self._group.enter()  # pids.max: processes counted for this evaluation alone
        else:
            # counted for the uid host-wide: another sandbox under it shares the budget
            cap(resource.RLIMIT_NPROC, self.settings.max_processes)
        cap(resource.RLIMIT_CORE, 0)
        cap(resource.RLIMIT_FSIZE, self.settings.max_file_bytes)
        # SIGXCPU at the soft limit names the breach; SIGKILL a few seconds later, should
        # the candidate catch the signal (with both equal the kernel sends SIGKILL first)
        soft_cpu = self.settings.cpu_seconds
        hard_cpu = resource.getrlimit(resource.RLIMIT_CPU)[1]
        if hard_cpu == resource.RLIM_INFINITY or hard_cpu > soft_cpu + 5:
            resource.setrlimit(resource.RLIMIT_CPU, (soft_cpu, soft_cpu + 5))
        else:
            resource.setrlimit(resource.RLIMIT_CPU, (min(soft_cpu, hard_cpu), hard_cpu))
        if self.device == "cpu" and self.settings.cpu_address_space_bytes:
            cap(resource.RLIMIT_AS, self.settings.cpu_address_space_bytes)

    def _died(self) -> ChildDied:
        returncode = None
        if self._process is not None:
            try:
                returncode = self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                returncode = None
        if self.isolation.private_root and returncode is not None and 128 < returncode < 160:
            returncode = 128 - returncode  # the init shell reports a signal death as 128+N
        tail = self.stderr_tail()
        self._cleanup()
        return ChildDied(returncode, tail)

    def _cleanup(self) -> None:
        if self._process is not None:
            _bound_groups.discard(self._process.pid)
            if self._process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=30)
            # unshare is gone, but the namespace's first process may still be exiting (its
            # memory, CUDA context and namespace torn down): "killed" means gone.
            if self._inner_pidfd is not None:
                _wait_readable(self._inner_pidfd, timeout_s=30)
            if self._process.stdin:
                with contextlib.suppress(OSError):
                    self._process.stdin.close()
            self._process = None
        if self._group is not None:
            self._breaches += self._group.breaches()
            self._group.remove()
            self._group = None
        if self._events_fd is not None:
            os.close(self._events_fd)
            self._events_fd = None
        if self._inner_pidfd is not None:
            os.close(self._inner_pidfd)
            self._inner_pidfd = None
        if self._workdir_fd is not None:
            os.close(self._workdir_fd)
            self._workdir_fd = None
        if self._area is not None:  # its pages go with the last descriptor
            self._area.close()
            self._area = None
        self._ready = False
        self._bound = False
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        # Fresh logs for the next child, so a tail names this child's last words only.
        for name in ("stdout.log", "stderr.log"):
            (self._private / name).unlink(missing_ok=True)


def _parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None  # gone meanwhile


def _pidfd_of_only_child(pid: int) -> int | None:
    """A pidfd for `pid`'s one child (unshare --fork has exactly one); None where the
    kernel offers no pidfd or the child is already gone."""
    if not hasattr(os, "pidfd_open"):
        return None
    children = [int(entry.name) for entry in Path("/proc").iterdir()
                if entry.name.isdigit() and _parent_of(int(entry.name)) == pid]
    if len(children) != 1:
        return None
    try:
        pidfd = os.pidfd_open(children[0])
    except OSError:
        return None
    if _parent_of(children[0]) != pid:  # the pid was reused between the scan and the open
        os.close(pidfd)
        return None
    return pidfd


def _wait_readable(fd: int, timeout_s: float) -> None:
    """A pidfd turns readable when its process has exited."""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        selector.select(timeout=timeout_s)


# Process groups of the children of this process that hold a candidate: what a stop request
# kills (another thread, the stop watcher, reads it).
_bound_groups: set[int] = set()


def kill_bound_children() -> int:
    """SIGKILL the process group of every child bound to a candidate; the number killed."""
    killed = 0
    for group in list(_bound_groups):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
            killed += 1
    return killed


_PR_SET_PDEATHSIG = 1

try:  # looked up before any fork: the forked process only calls it
    _prctl: Any = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None


class WarmChildren:
    """A pool of started, unbound children kept ahead of need, for one device and DSL, as a
    GPU worker running jobs back to back needs them: the next evaluation skips the child's
    imports and CUDA/profiler start-up.

    `size` children are kept: one is enough while a job lasts longer than a child's start,
    and on an H200 a start took 7-11 s while a whole operator can take 5; with two, each
    child has had two jobs' time to start before one is taken. Children are taken oldest
    first (the first started is the first ready) and are never given back: `take` hands
    out a child no candidate has run in, which the evaluation closes when it ends, so
    nothing a team's code left in a process reaches another team's job. The pool is refilled
    as a child is taken, so its replacement starts while that job runs.

    A warm child launches no kernel while it waits (child_core.warm_up), so it does not disturb
    the timing of the evaluation running beside it.
    """

    def __init__(self, *, device: str, dsl: str, masked_paths: Sequence[Path],
                 settings: SandboxSettings, size: int = 1) -> None:
        if size < 1:
            raise ValueError("a pool of warm children holds at least one")
        self.device = device
        self.dsl = dsl
        self.masked_paths = tuple(masked_paths)
        self.settings = settings
        self.size = size
        self._ready: collections.deque[ChildProcess] = collections.deque()
        self.taken = 0  # children handed out, for the worker's log and tests
        self.cold_takes = 0  # of them, started on the spot (the pool was empty)

    def take(self) -> ChildProcess:
        """The oldest started child; one started now when the pool is empty. The pool is
        refilled before this returns (the starts do not wait)."""
        while self._ready:
            child = self._ready.popleft()
            if child.operator is None and _still_running(child):
                break
            child.close()  # died while waiting, or (never) bound: not handed out
        else:
            child = self._new()
            self.cold_takes += 1
        self.taken += 1
        self.refill()
        return child

    def refill(self) -> None:
        """Start children until `size` wait."""
        while len(self._ready) < self.size:
            self._ready.append(self._new())

    def prepare(self) -> None:
        """Start the pool now (a worker does this at start, before its first job)."""
        self.refill()

    @property
    def waiting(self) -> int:
        return len(self._ready)

    def close(self) -> None:
        while self._ready:
            self._ready.popleft().close()

    def _new(self) -> ChildProcess:
        child = ChildProcess(device=self.device, dsl=self.dsl, masked_paths=self.masked_paths,
                             settings=self.settings)
        child.start()
        return child


def _still_running(child: ChildProcess) -> bool:
    """A waiting child's process has not ended (killed by the OOM killer, say): a dead one
    would be started again on the job's clock, so the pool hands out the next one."""
    process = child._process
    return process is not None and process.poll() is None
