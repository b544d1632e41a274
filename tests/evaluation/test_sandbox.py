"""A candidate that misbehaves on one shape fails that shape cleanly; the next one runs.

Each candidate below is the honest Triton RMSNorm with one misbehaviour on the first dev
shape (hidden size 256); on the second shape it is honest again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import textwrap

import pytest

from evaluation.harness.evaluate import EvaluationSettings
from evaluation.harness.isolation.child_process import WarmChildren
from evaluation.harness.isolation.sandbox import planned_isolation
from tests.evaluation.helpers import TEST_SETTINGS, run_candidate, sample_source
from tests.paths import FIXTURE_RELEASE

HONEST = sample_source("rms_norm", "triton_native")
BAD_SHAPE, GOOD_SHAPE = "dev-t4-h256", "dev-t3-h200"


def misbehaving(body: str) -> str:
    return HONEST + "\n\n_Honest = Model\n\n\nclass Model(_Honest):\n" \
        "    def forward(self, x, weight):\n" \
        "        if x.shape[-1] == 256:\n" + textwrap.indent(textwrap.dedent(body), " " * 12) + \
        "        return super().forward(x, weight)\n"


def run_both(body: str, **settings: float) -> tuple[object, object]:
    chosen = dataclasses.replace(TEST_SETTINGS, **settings) if settings else TEST_SETTINGS
    return run_both_with(chosen, body)


def run_both_with(chosen: EvaluationSettings, body: str) -> tuple[object, object]:
    result = run_candidate("rms_norm", misbehaving(body), [BAD_SHAPE, GOOD_SHAPE], chosen)
    bad, good = result.shapes
    assert good.status == "passed", good.error  # the next shape still runs
    assert good.adoption is not None and good.adoption["verdict"] == "native"
    assert bad.status == "failed"
    return bad, good


def test_a_candidate_that_raises_fails_with_its_traceback() -> None:
    bad, good = run_both("raise ValueError('boom from the candidate')\n")
    assert bad.failed_stage == "compile"
    assert "ValueError: boom from the candidate" in (bad.error or "")
    assert "boom from the candidate" in (bad.traceback_tail or "")
    assert good.child_restarts == 0


def test_a_candidate_that_hangs_is_killed_at_the_timeout() -> None:
    bad, good = run_both("while True:\n    pass\n", compile_timeout_s=15.0)
    assert "timed out after 15 s" in (bad.error or "")
    assert bad.seconds < 40
    assert good.child_restarts == 1


def test_a_candidate_that_segfaults_fails_its_shape() -> None:
    bad, good = run_both("import ctypes\nctypes.string_at(0)\n")
    assert "SIGSEGV" in (bad.error or "")
    assert "Fatal Python error" in (bad.traceback_tail or "")  # faulthandler's report
    assert good.child_restarts == 1


def test_a_candidate_that_calls_os_exit_fails_its_shape() -> None:
    bad, good = run_both("import os\nos._exit(3)\n")
    assert "exited with code 3" in (bad.error or "")
    assert good.child_restarts == 1


def test_a_candidate_returning_its_input_fails() -> None:
    bad, _ = run_both("return x\n")
    assert bad.failed_stage == "correctness" and "elements wrong" in (bad.error or "")


def test_a_candidate_writing_its_result_into_an_input_fails() -> None:
    bad, _ = run_both("x.copy_(super().forward(x, weight))\nreturn x\n")
    assert bad.failed_stage == "correctness"
    assert "modified its input 'x'" in (bad.error or "")


def test_a_candidate_that_mutates_an_input_fails() -> None:
    bad, _ = run_both("out = super().forward(x, weight)\nweight.mul_(2)\nreturn out\n")
    assert "modified its input 'weight'" in (bad.error or "")


SNOOP = f"""
import json, os, socket
seen = {{}}
for name in ("roofline.json", "metadata.json"):
    path = {str(FIXTURE_RELEASE / "data" / "rms_norm")!r} + "/" + name
    try:
        seen[name] = "read %d bytes" % len(open(path).read())
    except OSError as exc:
        seen[name] = "denied: " + type(exc).__name__
seen["env_secret"] = os.environ.get("ATREX_TEST_SECRET")
seen["env_names"] = sorted(os.environ)
try:
    seen["parent_environ"] = "read %d bytes" % len(open("/proc/%d/environ" % os.getppid(), "rb").read())
except OSError as exc:
    seen["parent_environ"] = "denied: " + type(exc).__name__
seen["uid"] = os.getuid()
seen["cwd_files"] = sorted(os.listdir("."))
seen["operator_files"] = sorted(os.listdir("operator"))
try:
    socket.create_connection(("127.0.0.1", 5432), timeout=2).close()
    seen["network"] = "connected"
except OSError as exc:
    seen["network"] = "failed: " + str(exc)
raise RuntimeError("SNOOP" + json.dumps(seen) + "SNOOP")
"""


def test_the_child_sees_only_public_files_and_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATREX_TEST_SECRET", "do-not-leak")
    bad, _ = run_both(SNOOP)
    seen = json.loads((bad.error or "").split("SNOOP")[1])
    assert seen["roofline.json"].startswith("denied")
    assert seen["metadata.json"].startswith("denied")
    assert seen["env_secret"] is None
    assert not any(name.startswith(("DATABASE", "CELERY", "ATREX_TEST")) for name in seen["env_names"])
    assert seen["operator_files"] == ["input.py", "reference.py", "shapes.json"]
    assert set(seen["cwd_files"]) == {"candidate.py", "operator", "tmp", "home"}
    if planned_isolation(TEST_SETTINGS.sandbox, ()).pid_namespace:
        assert os.geteuid() == 0
        assert seen["uid"] == 65534
        assert seen["network"].startswith("failed")
        assert seen["parent_environ"].startswith("denied")


def test_warm_children_give_each_evaluation_a_fresh_process() -> None:
    warm = WarmChildren(device="cpu", dsl="triton", masked_paths=(FIXTURE_RELEASE,),
                        settings=TEST_SETTINGS.sandbox)
    try:
        first = run_candidate("rms_norm", HONEST, [GOOD_SHAPE], warm=warm)
        # A candidate that would find the first one's module if the process were reused.
        probe = HONEST + textwrap.dedent("""
            import sys
            if "atrex_operator_input" in sys.modules and len(
                    [m for m in sys.modules if m == "candidate"]) != 1:
                raise RuntimeError("reused process")
            """)
        second = run_candidate("rms_norm", probe, [GOOD_SHAPE], warm=warm)
        third = run_candidate("rms_norm", sample_source("rms_norm", "torch_fallback"),
                              [GOOD_SHAPE], warm=warm)
    finally:
        warm.close()
    assert first.shapes[0].verdict == "native"
    assert second.shapes[0].status == "passed", second.shapes[0].error
    assert third.shapes[0].verdict == "fallback-torch"


def test_a_child_is_bound_to_one_candidate_only() -> None:
    from evaluation.harness.isolation.child_process import ChildProcess
    from evaluation.harness.isolation.sandbox import HarnessError
    from evaluation.harness.release import load_release

    operator = load_release(FIXTURE_RELEASE).operator("rms_norm").public
    child = ChildProcess(device="cpu", dsl="triton", masked_paths=(),
                         settings=TEST_SETTINGS.sandbox)
    child.bind(operator, HONEST)
    with pytest.raises(HarnessError, match="one candidate only"):
        child.bind(operator, "class Model: pass")
    child.close()


def test_a_forged_result_channel_fails_the_shape_without_harming_the_parent() -> None:
    # The channel's descriptor is no longer in the environment; a forger finds it anyway.
    forge = """
import os
for name in os.listdir("/proc/self/fd"):
    try:
        if int(name) > 2 and os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
            os.write(int(name), b'{"event": "trial", "index": 0, '
                                b'"file": "../../../etc/passwd", "aliases": []}\\n')
    except OSError:
        pass
"""
    bad, _ = run_both(forge)
    assert bad.failed_stage == "correctness"
    assert "result channel" in (bad.error or "")


PEEK = """
import json, os
try:
    seen = "read: " + ",".join(sorted(os.listdir(NEIGHBOUR)))
except OSError as exc:
    seen = "denied: " + type(exc).__name__
raise RuntimeError("PEEK" + json.dumps(seen) + "PEEK")
"""


@pytest.mark.skipif(not planned_isolation(TEST_SETTINGS.sandbox, ()).private_root,
                    reason="needs root for the sandbox's private root (CI and GPU hosts have it)")
@pytest.mark.parametrize("neighbour_uid", [65533, 65534])  # its own slot uid, and ours
def test_a_neighbours_work_folder_is_out_of_reach_whatever_its_uid(neighbour_uid: int) -> None:
    from evaluation.harness.isolation.child_process import ChildProcess
    from evaluation.harness.release import load_release

    operator = load_release(FIXTURE_RELEASE).operator("rms_norm").public
    other_slot = dataclasses.replace(TEST_SETTINGS.sandbox, child_uid=neighbour_uid,
                                     child_gid=neighbour_uid)
    neighbour = ChildProcess(device="cpu", dsl="triton", masked_paths=(), settings=other_slot)
    neighbour.start()
    neighbour.bind(operator, HONEST)
    try:
        neighbour.ensure_started()  # its candidate.py is now in its work folder
        assert neighbour.workdir is not None and (neighbour.workdir / "candidate.py").is_file()
        bad, _ = run_both(PEEK.replace("NEIGHBOUR", repr(str(neighbour.workdir))))
    finally:
        neighbour.close()
    # Not a permission question: the folder does not exist in the child's private root.
    assert json.loads((bad.error or "").split("PEEK")[1]) == "denied: FileNotFoundError"


@pytest.mark.skipif(not planned_isolation(TEST_SETTINGS.sandbox, ()).private_root,
                    reason="needs root for the sandbox's uid switch (CI and GPU hosts have it)")
def test_a_sandbox_uid_without_a_passwd_entry_gives_the_same_verdicts() -> None:
    """Per-worker uids (60001, ...) have no passwd entry; on an H200 every job failed under
    one, in torch's `getpass.getuser()`. A candidate asks the same question here."""
    import pwd

    with pytest.raises(KeyError):
        pwd.getpwuid(60001)
    asks_who = HONEST + "\nimport getpass\n_WHO = getpass.getuser()\n"
    fallback = sample_source("rms_norm", "torch_fallback")
    verdicts = {}
    for uid in (65534, 60001):
        sandbox = dataclasses.replace(TEST_SETTINGS.sandbox, child_uid=uid, child_gid=uid)
        settings = dataclasses.replace(TEST_SETTINGS, sandbox=sandbox)
        verdicts[uid] = [(s.status, s.verdict, s.error) for source in (asks_who, fallback)
                         for s in run_candidate("rms_norm", source, [GOOD_SHAPE], settings).shapes]
    assert verdicts[60001] == verdicts[65534] == [("passed", "native", None),
                                                  ("passed", "fallback-torch", None)]


def test_the_sandbox_uid_comes_from_the_workers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluation.harness.isolation.sandbox import SandboxSettings

    monkeypatch.setenv("ATREX_SANDBOX_UID", "61001")
    monkeypatch.setenv("ATREX_SANDBOX_GID", "61001")
    assert (SandboxSettings().child_uid, SandboxSettings().child_gid) == (61001, 61001)
    monkeypatch.setenv("ATREX_SANDBOX_UID", "root")
    with pytest.raises(ValueError, match="ATREX_SANDBOX_UID"):
        SandboxSettings()


@pytest.mark.skipif(not planned_isolation(TEST_SETTINGS.sandbox, ()).pid_namespace,
                    reason="needs root for the PID namespace (CI and GPU hosts have it)")
def test_a_killed_child_is_gone_when_kill_returns() -> None:
    """unshare dies at once; the namespace's first process, holding the candidate's memory,
    takes a while to tear down. A worker that reports "cancelled" or starts the next child
    meanwhile would overlap them; kill() waits until every process of the child is gone."""
    from evaluation.harness.isolation.child_process import ChildProcess
    from evaluation.harness.release import load_release
    from tests.worker import descendants, running

    operator = load_release(FIXTURE_RELEASE).operator("rms_norm").public
    child = ChildProcess(device="cpu", dsl="triton", masked_paths=(),
                         settings=TEST_SETTINGS.sandbox)
    # 1.5 GiB written at import: slow enough to free that the race shows without the wait.
    child.bind(operator, HONEST + "\n_BALLAST = b'x' * (1536 << 20)\n")
    try:
        child.ensure_started()
        assert child._process is not None
        processes = [child._process.pid, *descendants(child._process.pid)]
        assert len(processes) >= 2  # unshare and the namespace's first process
        child.kill()
        assert [pid for pid in processes if running(pid)] == []
    finally:
        child.close()



def test_a_child_that_failed_to_start_is_started_once_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child started ahead can meet the GPU full (the previous candidate held all of it):
    its first request starts it again rather than failing the whole evaluation."""
    from evaluation.harness.isolation.child_process import ChildProcess

    real_argv = ChildProcess._argv
    calls: list[int] = []

    def first_start_fails(self: ChildProcess) -> list[str]:
        calls.append(1)
        return ["/bin/false"] if len(calls) == 1 else real_argv(self)

    monkeypatch.setattr(ChildProcess, "_argv", first_start_fails)
    warm = WarmChildren(device="cpu", dsl="triton", masked_paths=(FIXTURE_RELEASE,),
                        settings=TEST_SETTINGS.sandbox)
    try:
        result = run_candidate("rms_norm", HONEST, [GOOD_SHAPE], warm=warm)
    finally:
        warm.close()
    assert result.shapes[0].status == "passed", result.shapes[0].error
    assert len(calls) >= 2


@pytest.mark.skipif(not planned_isolation(TEST_SETTINGS.sandbox, ()).private_root,
                    reason="needs root for the sandbox's private root")
def test_the_childs_limits_are_reported_with_every_result() -> None:
    from pathlib import Path

    from evaluation.harness.isolation.child_process import ChildProcess
    from evaluation.harness.isolation.limits import hierarchy

    result = run_candidate("rms_norm", HONEST, [GOOD_SHAPE])
    limits = result.isolation["limits"]
    settings = TEST_SETTINGS.sandbox
    assert result.isolation["syscall_filter"] is True
    assert limits["scratch_bytes"] == settings.scratch_bytes
    assert limits["output_bytes"] == settings.output_bytes
    assert limits["cpu_seconds"] == settings.cpu_seconds == 6 * 3600
    groups = hierarchy()
    assert limits["enforced_by"] == (f"cgroup v{groups.version}" if groups else "rlimit")
    assert limits["memory_bytes"] == (settings.memory_bytes if groups else None)
    # The child's folder is a tmpfs of its own with the scratch size, and goes with it.
    child = ChildProcess(device="cpu", dsl="triton", masked_paths=(), settings=settings)
    mounts = {line.split()[4]: line.split(" - ")[1] for line in
              Path("/proc/self/mountinfo").read_text().splitlines()}
    home = str(child._home)
    assert mounts[home].startswith("tmpfs ") and \
        f"size={settings.scratch_bytes // 1024}k" in mounts[home], mounts[home]
    child.close()
    assert home not in {line.split()[4] for line in
                        Path("/proc/self/mountinfo").read_text().splitlines()}
    assert not Path(home).exists()


def test_the_private_tmp_and_shm_are_size_capped() -> None:
    from evaluation.harness.isolation import jail

    plan = jail.mount_plan(readonly=[], masks=[], gpu=False, tmpfs_bytes=64 * 2**20)
    capped = {op.target: op.mode for op in plan if op.kind == "tmpfs"}
    assert capped == {"/dev/shm": f"1777,size={64 * 2**20}", "/tmp": f"1777,size={64 * 2**20}"}


def test_a_candidate_past_its_cpu_time_is_killed_and_the_next_shape_runs() -> None:
    # The child's start (torch, Triton) takes a few CPU seconds; the candidate then spins
    # past the limit on the first shape, well inside the wall timeout.
    sandbox = dataclasses.replace(TEST_SETTINGS.sandbox, cpu_seconds=20)
    settings = dataclasses.replace(TEST_SETTINGS, sandbox=sandbox, call_timeout_s=120.0,
                                   compile_timeout_s=120.0)
    bad, good = run_both_with(settings, """
        import resource
        while resource.getrusage(resource.RUSAGE_SELF).ru_utime < 40:
            pass
    """)
    assert "used up its CPU time (RLIMIT_CPU) and was killed by SIGXCPU" in (bad.error or ""), \
        bad.error
