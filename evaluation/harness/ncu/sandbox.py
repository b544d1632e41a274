"""A team's ncu profile of one shape, run with the candidate in its sandbox.

Probed on the H200 (benchmarks/ncu_sandbox_probe.sh, 2026-12-03): ncu cannot count a process
behind the sandbox's walls from outside them. Its front-end and the injection it loads into
the target talk over TCP on the loopback, so a target in its own network namespace hangs
(and one in its own PID namespace too); a root front-end with the target under another uid
fails (error 6: the target cannot use the front-end's files). What works: the front-end
inside every wall with its target. So here ncu is one more process of the candidate's own
jail (target_main.py):

    unshare (mount, net, pid) -> the jail script (root: the private root) ->
      loopback up -> setpriv (the sandbox uid, no new privileges, no groups) ->
      the syscall filter -> ncu (clocks left alone, caches flushed) -> the target

ncu gains the candidate nothing: the same uid, namespaces, filter, control group and limits
as its evaluation, the network namespace's loopback its only network. What the candidate can
do to ncu is what it can do to its own process: fake its own counters. A profile is never
scored and only its own team sees it, and the parent (trusted) reads ncu's log only once the
whole tree is dead, bounded in size, and parses it (ncu_profile.parse_report) as untrusted
text. Needs, on the GPU host: ncu (Nsight Compute) under /usr or /opt/nvidia (bound into
the jail read-only), and profiling open to non-admin users (the driver's RmProfilingAdminOnly 0, as
on the lent H200; else ncu reports ERR_NVGPUCTRPERM).

Imports no Django.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..isolation import jail
from ..isolation.child_process import ChildProcess
from ..isolation.sandbox import HarnessError, SandboxSettings, _plan
from ..isolation.workarea import make_dir, remove_tree, write_file
from ..release import PUBLIC_FILES, PublicOperator, ShapeSpec
from . import profile as ncu_profile

TARGET_MAIN_INSIDE = jail.CODE / "evaluation" / "harness" / "ncu" / "target_main.py"
REPORT_MAX_BYTES = 8 * 1024**2  # ncu's log of 64 kernels with our metrics: tens of KiB
PROFILE_DIR = "profile"  # in the work folder: the sandbox uid's, where ncu writes its log


@dataclass
class NcuProfile:
    """What a profile run gives a team: one entry per kernel launch, the clocks ncu saw."""

    shape_id: str
    kernels: list[dict[str, Any]] = field(default_factory=list)
    clocks: dict[str, float | None] = field(default_factory=dict)
    error: str | None = None  # why there are no kernels (the candidate failed, ncu did)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"shape_id": self.shape_id, "kernels": self.kernels, "clocks": self.clocks,
                "error": self.error, "seconds": self.seconds}


def find_ncu() -> str | None:
    found = shutil.which("ncu") or next(
        (str(p) for p in sorted(Path("/usr/local").glob("cuda*/bin/ncu"))), None)
    return str(Path(found).resolve()) if found else None


def nsight_compute_dirs() -> list[Path]:
    """Nsight Compute's installs outside /usr (which the jail has already): /opt/nvidia's."""
    return sorted(p for p in Path("/opt/nvidia").glob("nsight-compute*") if p.is_dir())


_known: dict[str, list[str]] = {}


def available_metrics(ncu: str) -> list[str]:
    """The profile's metrics this ncu knows (it refuses a run over one unknown name: which
    tensor pipes exist differs between chips and versions). Asked outside the sandbox: no
    candidate is involved."""
    if ncu not in _known:
        query = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True,
                               timeout=120)
        _known[ncu] = ncu_profile.known_metrics(query.stdout) or list(
            ncu_profile.METRICS.values())
    return _known[ncu]


class _ProfiledChild(ChildProcess):
    """A ChildProcess whose jail runs ncu over one forward instead of serving requests."""

    def __init__(self, *, operator: PublicOperator, candidate_source: str, shape: ShapeSpec,
                 ncu_argv: Sequence[str], settings: SandboxSettings, dsl: str) -> None:
        super().__init__(device="cuda", dsl=dsl, masked_paths=(), settings=settings)
        if not self.isolation.private_root:
            raise HarnessError("an ncu profile runs only in the sandbox's private root")
        self._profiled = (operator, candidate_source, shape, tuple(ncu_argv))

    def _make_workdir(self) -> None:
        super()._make_workdir()
        assert self._workdir_fd is not None
        operator, source, shape, _ = self._profiled
        operator_fd = make_dir(self._workdir_fd, "operator", 0o755)
        try:
            for name in PUBLIC_FILES:
                write_file(operator_fd, name, (operator.directory / name).read_bytes())
        finally:
            os.close(operator_fd)
        write_file(self._workdir_fd, "candidate.py", source.encode("utf-8"))
        write_file(self._workdir_fd, "shape.json", json.dumps(
            {"init_kwargs": dict(shape.init_kwargs), "input_kwargs": dict(shape.input_kwargs)}
        ).encode())
        os.close(make_dir(self._workdir_fd, PROFILE_DIR, 0o700, self._owner))

    def _jail_script(self) -> str:
        assert self.workdir is not None
        _, _, _, ncu_argv = self._profiled
        paths = jail.JailPaths(mountpoint=self._home / "root", workdir=self.workdir,
                               cache_dir=self._cache_dir)
        python = [sys.executable, "-I", "-B", str(TARGET_MAIN_INSIDE)]
        log = jail.WORK / PROFILE_DIR / "ncu.csv"
        payload = [*python, "up", "--", "/usr/bin/setpriv", f"--reuid={self.settings.child_uid}",
                   f"--regid={self.settings.child_gid}", "--clear-groups", "--no-new-privs",
                   "--", *python, "ncu", "--", *ncu_argv, "--log-file", str(log),
                   *python, "target"]
        # ncu's own files, read-only (its launcher under /usr finds them there, or in /opt)
        plan = [*_plan(self.settings, self.masked_paths, gpu=True),
                *(jail.Op("bind_ro", str(d), str(d)) for d in nsight_compute_dirs())]
        return "unset ATREX_JAIL_SCRIPT\n" + jail.script(paths, plan, payload)

    def run(self, timeout_s: float) -> tuple[int | None, str, str]:
        """Spawn, wait for the whole tree, return (exit code, ncu's log, stderr's tail)."""
        self._spawn()
        assert self._process is not None and self.workdir is not None
        workdir = self.workdir  # cleaning up forgets it; the folder stays until close()
        try:
            code: int | None = self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        # Every process of the tree is gone before the log is read: unshare ended (and with
        # --kill-child took the namespace with it), or it is killed now.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()
        log = workdir / PROFILE_DIR / "ncu.csv"
        text = ""
        if log.is_file() and not log.is_symlink():
            with open(log, "rb") as handle:
                text = handle.read(REPORT_MAX_BYTES).decode("utf-8", "replace")
        tails = self.stderr_tail() + self._stdout_tail()
        self._cleanup()  # the work folder and the logs go
        return code, text, tails

    def _stdout_tail(self) -> str:
        path = self._private / "stdout.log"
        return path.read_text(errors="replace")[-2000:] if path.is_file() else ""

    def close(self) -> None:
        self._cleanup()
        remove_tree(self._home)


def profile_shape(operator: PublicOperator, candidate_source: str, shape: ShapeSpec, *,
                  dsl: str, settings: SandboxSettings, hbm_peak_bytes_per_s: float | None,
                  ncu: str | None = None, metrics: Sequence[str] | None = None,
                  timeout_s: float = 300.0) -> NcuProfile:
    """ncu over one forward of the candidate on `shape`, in its sandbox; parsed counters."""
    started = time.perf_counter()
    result = NcuProfile(shape_id=shape.id)
    ncu = ncu or find_ncu()
    if ncu is None:
        result.error = "this GPU host has no ncu (Nsight Compute)"
        return result
    argv = ncu_profile.command(ncu, [], metrics or available_metrics(ncu))
    child = _ProfiledChild(operator=operator, candidate_source=candidate_source, shape=shape,
                           ncu_argv=argv, settings=settings, dsl=dsl)
    try:
        code, text, stderr = child.run(timeout_s)
    finally:
        child.close()
    result.seconds = time.perf_counter() - started
    try:
        kernels = ncu_profile.parse_report(text, hbm_peak_bytes_per_s)
    except ncu_profile.ReportUnreadable as exc:
        tail = stderr.strip().splitlines()[-3:]
        result.error = (f"no kernel counted (exit code {code}): {exc}"
                        + (f"; the run's last words: {' | '.join(tail)}" if tail else ""))
        return result
    result.kernels = [k.to_dict() for k in kernels]
    result.clocks = ncu_profile.clocks_seen(kernels)
    return result
