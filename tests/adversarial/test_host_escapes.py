"""Candidates that attack the host around the sandbox, each stopped on a CPU (issue 14).

Unlike the cases of test_cpu_cases.py, each needs something of the host set up to attack: a
file planted in the checkout, a root-only file, a Unix socket, a warm child for the next
job, a worker process to kill. The candidate files name those with placeholders that the
test fills in, as a cheater who read the docs or an earlier error message would.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluation.harness.isolation.child_process import WarmChildren
from evaluation.harness.isolation.sandbox import SandboxSettings, planned_isolation, workdir_base
from evaluation.harness.isolation.workarea import AREA_PREFIX, WorkArea, work_area
from evaluation.harness.release import load_release
from tests.adversarial.cases import HOST_CASES
from tests.evaluation.helpers import TEST_SETTINGS, run_candidate, sample_source
from tests.paths import FIXTURE_RELEASE, REPO
from tests.worker import descendants, running

CANDIDATES = Path(__file__).parent / "candidates"
HONEST = sample_source("rms_norm", "triton_native")
SHAPES = ["dev-t4-h256", "dev-t3-h200"]

pytestmark = pytest.mark.skipif(
    not planned_isolation(SandboxSettings(), ()).private_root,
    reason="needs root for the sandbox's namespaces (CI and GPU hosts have it)")


def candidate(case: str, **fill: str) -> str:
    source = (CANDIDATES / f"{case}.py").read_text()
    for name, value in fill.items():
        source = source.replace(f"__{name}__", value)
    return source


def report(error: str | None, marker: str) -> dict[str, object]:
    """What the candidate smuggled out in its error message (it must fit: 1,000 chars)."""
    assert error is not None and error.count(marker) == 2, error
    return dict(json.loads(error.split(marker)[1]))


def run_attack(source: str) -> dict[str, object]:
    result = run_candidate("rms_norm", source, SHAPES)
    first, second = result.shapes
    assert second.status == "passed" and second.verdict == "native", second.error
    assert first.status == "failed"
    return {"error": first.error}


@pytest.fixture
def canary() -> Iterator[Path]:
    """A file in the checkout, where hidden data is (as `git` or a path would find it)."""
    path = REPO / f".atrex-canary-{secrets.token_hex(4)}"
    path.write_text("CANARY-SECRET")
    path.chmod(0o644)  # world-readable: only the sandbox's root keeps it out of reach
    try:
        yield path
    finally:
        path.unlink()


def test_the_checkout_and_its_history_are_not_in_the_childs_root(canary: Path) -> None:
    outcome = run_attack(candidate("read_checkout", REPO=str(REPO), CANARY=str(canary)))
    found = report(str(outcome["error"]), "FOUND")
    assert str(found["canary"]).startswith("denied: FileNotFoundError")
    assert str(found["starter_roofline"]).startswith("denied: FileNotFoundError")
    # the virtual environment may live in the checkout (it does here): nothing else of it
    listing = found["repo_listing"]
    assert listing == "denied: FileNotFoundError" or (isinstance(listing, list)
                                                      and set(listing) <= {".venv"}), listing
    assert not str(found["git_repo"]).startswith("ok")
    assert not str(found["git_harness"]).startswith("ok")
    assert found["hits"] == []


def test_links_planted_for_the_next_candidate_reach_nothing(tmp_path: Path) -> None:
    target = tmp_path / "root-only"
    target.write_text("ROOT-ONLY")
    target.chmod(0o600)
    warm = WarmChildren(device="cpu", dsl="triton", masked_paths=(FIXTURE_RELEASE,),
                        settings=TEST_SETTINGS.sandbox)
    try:
        area = work_area(workdir_base(TEST_SETTINGS.sandbox))
        warm.take().close()  # now the child for the next job is warm, its folder made
        assert warm.waiting and warm._ready[0].workdir is not None
        outcome = run_attack(candidate("plant_links", AREA=str(area.path), TARGET=str(target)))
        planted = report(str(outcome["error"]), "PLANTED")
        honest = run_candidate("rms_norm", HONEST, SHAPES[1:], warm=warm)  # in the warm child
    finally:
        warm.close()
    assert planted["planted"] == 0, planted
    assert honest.shapes[0].status == "passed", honest.shapes[0].error
    stat = target.stat()
    assert (stat.st_uid, stat.st_mode & 0o777, target.read_text()) == (0, 0o600, "ROOT-ONLY")


def test_the_parent_never_writes_through_a_link_in_a_work_folder(tmp_path: Path) -> None:
    """Even if a link got there, root would not follow it: files are created O_EXCL |
    O_NOFOLLOW relative to the folder's descriptor."""
    from evaluation.harness.isolation.child_process import ChildProcess

    target = tmp_path / "root-only"
    target.write_text("ROOT-ONLY")
    target.chmod(0o600)
    operator = load_release(FIXTURE_RELEASE).operator("rms_norm").public
    child = ChildProcess(device="cpu", dsl="triton", masked_paths=(), settings=TEST_SETTINGS.sandbox)
    child.start()
    try:
        assert child.workdir is not None
        (child.workdir / "candidate.py").symlink_to(target)  # as root: the worst case
        child.bind(operator, HONEST)
        with pytest.raises(FileExistsError):
            child.ensure_started()
    finally:
        child.close()
    stat = target.stat()
    assert (stat.st_uid, stat.st_mode & 0o777, target.read_text()) == (0, 0o600, "ROOT-ONLY")


def test_host_unix_sockets_are_out_of_reach(tmp_path: Path) -> None:
    folder = tmp_path / "sockets"
    folder.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    path = folder / "server.sock"
    abstract = f"atrex-test-{secrets.token_hex(4)}"
    servers = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2)]
    try:
        servers[0].bind(str(path))
        path.chmod(0o777)
        servers[1].bind("\0" + abstract)
        for server in servers:
            server.listen(8)
            server.setblocking(False)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:  # reachable from here
            probe.connect(str(path))
        servers[0].accept()[0].close()
        outcome = run_attack(candidate("unix_sockets", SOCKET=str(path), ABSTRACT=abstract))
        found = report(str(outcome["error"]), "SOCKETS")
        for server in servers:
            with pytest.raises(BlockingIOError):
                server.accept()  # nobody else came
    finally:
        for server in servers:
            server.close()
    assert found["connected"] == [], found
    assert found["sockets_seen"] == [], found


WORKER = """
import sys
from pathlib import Path
from evaluation.harness.evaluate import EvaluationRequest, EvaluationSettings, evaluate
from evaluation.harness.release import load_release
from evaluation.harness.isolation.sandbox import SandboxSettings

release = load_release(Path(sys.argv[1]))
op = release.operator("rms_norm")
settings = EvaluationSettings(compile_timeout_s=600, call_timeout_s=600, device="cpu",
                              sandbox=SandboxSettings(workdir_base=sys.argv[3]))
job = EvaluationRequest(operator=op.public, candidate_source=Path(sys.argv[2]).read_text(),
                    tolerance=op.tolerance, shape_ids=["dev-t3-h200"])
print("evaluating", flush=True)
evaluate(job, settings)
"""


def _spawn_worker(base: Path, source: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", WORKER, str(FIXTURE_RELEASE), str(source),
                             str(base)], cwd=REPO, stdout=subprocess.DEVNULL)


def test_a_killed_worker_takes_its_candidate_along_and_its_folders_are_swept(
        tmp_path: Path) -> None:
    base = tmp_path / "work"
    base.mkdir()
    source = tmp_path / "candidate.py"
    source.write_text(candidate("outlive_worker"))
    worker = _spawn_worker(base, source)
    try:
        # unshare, the namespace's init, the child and the candidate's daemon
        deadline = time.monotonic() + 120
        while len(processes := descendants(worker.pid)) < 4:
            assert worker.poll() is None and time.monotonic() < deadline, processes
            time.sleep(0.2)
        time.sleep(1.0)  # into forward, which hangs
        processes = descendants(worker.pid)
        areas = list(base.glob(AREA_PREFIX + "*"))
        assert len(areas) == 1 and any(areas[0].rglob("candidate.py"))
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        deadline = time.monotonic() + 15
        while [pid for pid in processes if running(pid)] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [pid for pid in processes if running(pid)] == []
    finally:
        for pid in descendants(worker.pid) if worker.poll() is None else []:
            os.kill(pid, signal.SIGKILL)
        worker.kill()
    assert areas[0].exists()  # nobody removed it: the worker died without a chance to
    fresh = WorkArea(base)  # the next worker starting on the host
    try:
        assert not areas[0].exists()
        assert fresh.path.exists()
    finally:
        fresh.remove()


def test_a_worker_that_ends_normally_leaves_no_folder(tmp_path: Path) -> None:
    base = tmp_path / "work"
    base.mkdir()
    source = tmp_path / "candidate.py"
    source.write_text(HONEST)
    worker = _spawn_worker(base, source)
    assert worker.wait(timeout=300) == 0
    assert list(base.iterdir()) == []


def test_a_live_workers_area_is_not_swept(tmp_path: Path) -> None:
    live = WorkArea(tmp_path)
    try:
        WorkArea(tmp_path).remove()  # its start sweeps: the live one holds its lock
        assert live.path.exists()
    finally:
        live.remove()


def test_the_isolation_report_says_the_child_had_a_private_root() -> None:
    result = run_candidate("rms_norm", HONEST, SHAPES[1:])
    assert result.isolation["private_root"] is True
    assert result.isolation["network_namespace"] and result.isolation["pid_namespace"]


def test_every_host_case_has_its_candidate_file() -> None:
    assert all((CANDIDATES / f"{case}.py").is_file() for case in HOST_CASES)



def test_a_python_install_under_tmp_is_bound_over_the_private_tmp(tmp_path: Path) -> None:
    """A checkout cloned under /tmp keeps its .venv there: the child's empty /tmp must be
    mounted first and the install bound on top of it, or the child cannot start (exit 127)."""
    from evaluation.harness.isolation.jail import mount_plan

    venv = tmp_path / "checkout" / ".venv"
    venv.mkdir(parents=True)
    plan = mount_plan(readonly=[venv], masks=[], gpu=False)
    steps = [(op.kind, op.target) for op in plan]
    assert steps.index(("tmpfs", "/tmp")) < steps.index(("bind_ro", str(venv)))
    assert ("bind_ro", "/tmp") not in steps  # the host's /tmp itself stays out of reach
