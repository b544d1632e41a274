"""Per-evaluation limits the kernel enforces: memory (tmpfs pages included) and processes.

A sandboxed child gets a control group of its own where the host lets the root worker make
one (cgroup v1 with the memory and pids controllers, or cgroup v2 with both delegated):
`memory.max` / `memory.limit_in_bytes` counts everything the candidate's processes touch,
anonymous memory and tmpfs pages alike, and `pids.max` counts its processes and threads,
for this evaluation only (RLIMIT_NPROC counts every process of the uid on the host, so a
fork bomb starved every sandbox running under it). The child enters its group in the
forked process before exec, so nothing of the candidate ever runs outside it.

Where no group can be made (not root, no controllers), the rlimits and the size-capped
tmpfs mounts of child_process.py are what is left; `Isolation.notes` says so.

Imports no Django.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP_PREFIX = "atrex-sandbox-"


@dataclass(frozen=True)
class Hierarchy:
    """Where this host's per-child groups go."""

    version: int  # 1 or 2
    memory_parent: Path  # v2: one parent for both controllers
    pids_parent: Path


def _own_group(controller: str) -> str | None:
    """This process's cgroup path for a v1 controller, or the v2 path ('' controller)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return None


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def _v1() -> Hierarchy | None:
    memory_path, pids_path = _own_group("memory"), _own_group("pids")
    if memory_path is None or pids_path is None:
        return None
    memory = CGROUP_ROOT / "memory" / memory_path.lstrip("/")
    pids = CGROUP_ROOT / "pids" / pids_path.lstrip("/")
    if not (_writable_dir(memory) and _writable_dir(pids)
            and (memory / "cgroup.procs").exists() and (pids / "cgroup.procs").exists()):
        return None
    return Hierarchy(1, memory, pids)


def _v2() -> Hierarchy | None:
    """A v2 parent for the children's groups: the one an operator prepared (ATREX_CGROUP_PARENT,
    memory and pids in its subtree_control), else one made under the real root cgroup."""
    configured = os.environ.get("ATREX_CGROUP_PARENT", "").strip()
    if configured:
        parent = Path(configured)
        try:
            enabled = (parent / "cgroup.subtree_control").read_text().split()
        except OSError:
            return None
        return Hierarchy(2, parent, parent) if {"memory", "pids"} <= set(enabled) else None
    if _own_group("") != "/" or not (CGROUP_ROOT / "cgroup.subtree_control").exists():
        return None
    parent = CGROUP_ROOT / "atrex-sandbox"
    try:
        (CGROUP_ROOT / "cgroup.subtree_control").write_text("+memory +pids")
        parent.mkdir(exist_ok=True)
        (parent / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError:
        return None
    return Hierarchy(2, parent, parent)


@functools.cache
def hierarchy() -> Hierarchy | None:
    """This host's place for per-child groups, probed once; None where none can be made."""
    if os.geteuid() != 0 or os.environ.get("ATREX_CGROUPS", "") == "0":
        return None
    found = _v2() or _v1()
    if found is None:
        return None
    probe = ChildGroup.make(found, memory_bytes=1 << 30, max_processes=64, tag="probe")
    if probe is None:
        return None
    probe.remove()
    return found


class ChildGroup:
    """One child's group: made before the spawn, entered before exec, removed after death."""

    def __init__(self, hierarchy: Hierarchy, memory_dir: Path, pids_dir: Path,
                 memory_bytes: int, max_processes: int) -> None:
        self.hierarchy = hierarchy
        self.memory_dir = memory_dir
        self.pids_dir = pids_dir
        self.memory_bytes = memory_bytes
        self.max_processes = max_processes
        self._reported = (0, 0)  # limit counters already said in an error
        # The forked process only writes "0" (itself) to these before exec.
        self.procs_files = sorted({memory_dir / "cgroup.procs", pids_dir / "cgroup.procs"})

    @classmethod
    def make(cls, where: Hierarchy, *, memory_bytes: int, max_processes: int,
             tag: str) -> ChildGroup | None:
        name = f"{GROUP_PREFIX}{os.getpid()}-{tag}-{time.monotonic_ns()}"
        memory_dir, pids_dir = where.memory_parent / name, where.pids_parent / name
        try:
            memory_dir.mkdir()
            if pids_dir != memory_dir:
                pids_dir.mkdir()
            if where.version == 2:
                (memory_dir / "memory.max").write_text(str(memory_bytes))
                swap, swap_limit = memory_dir / "memory.swap.max", "0"
            else:
                (memory_dir / "memory.limit_in_bytes").write_text(str(memory_bytes))
                swap, swap_limit = memory_dir / "memory.memsw.limit_in_bytes", str(memory_bytes)
            if swap.exists():  # memory pushed to swap still counts
                with contextlib.suppress(OSError):
                    swap.write_text(swap_limit)
            (pids_dir / "pids.max").write_text(str(max_processes))
        except OSError:
            for folder in {memory_dir, pids_dir}:
                with contextlib.suppress(OSError):
                    folder.rmdir()
            return None
        return cls(where, memory_dir, pids_dir, memory_bytes, max_processes)

    def enter(self) -> None:
        """Move the calling process in (the forked child, before exec)."""
        for path in self.procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def breaches(self) -> list[str]:
        """Each limit the group's processes ran into since the last call, said for the
        shape's error."""
        counts = (self._memory_count(), self._pids_count())
        hit = [now > before for now, before in zip(counts, self._reported, strict=True)]
        self._reported = counts
        notes: list[str] = []
        if hit[0]:
            notes.append(f"the evaluation reached its memory limit of "
                         f"{self.memory_bytes / 2**30:.1f} GiB (its processes' memory and the "
                         "files they wrote to memory-backed folders, counted together)")
        if hit[1]:
            notes.append(f"the evaluation reached its limit of {self.max_processes} processes "
                         "and threads")
        return notes

    def process_count(self) -> int:
        """Processes (not threads) in the group now: unshare, the sandbox's init, the child,
        and whatever they started."""
        try:
            return len((self.pids_dir / "cgroup.procs").read_text().split())
        except OSError:
            return 0

    def _memory_count(self) -> int:
        if self.hierarchy.version == 2:
            events = _counters(self.memory_dir / "memory.events")
            return events.get("oom_kill", 0) + events.get("max", 0)
        try:
            return int((self.memory_dir / "memory.failcnt").read_text())
        except (OSError, ValueError):
            return 0

    def _pids_count(self) -> int:
        return _counters(self.pids_dir / "pids.events").get("max", 0)

    def remove(self) -> None:
        """Remove the group once its processes are gone (waits a little for the last)."""
        for folder in {self.memory_dir, self.pids_dir}:
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _counters(path: Path) -> dict[str, int]:
    try:
        pairs = (line.split() for line in path.read_text().splitlines())
        return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}
    except OSError:
        return {}


def sweep_stale_groups() -> list[Path]:
    """Remove the empty groups of workers that are gone (a killed worker leaves them)."""
    where = hierarchy()
    removed: list[Path] = []
    if where is None:
        return removed
    for parent in {where.memory_parent, where.pids_parent}:
        with contextlib.suppress(OSError):
            for entry in parent.iterdir():
                if not entry.name.startswith(GROUP_PREFIX):
                    continue
                pid = entry.name[len(GROUP_PREFIX):].split("-", 1)[0]
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    with contextlib.suppress(OSError):
                        entry.rmdir()
                        removed.append(entry)
    return removed
