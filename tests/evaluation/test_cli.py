"""`python -m evaluation evaluate` and `check-release`: table, JSON, exit codes."""

from __future__ import annotations

import json
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from evaluation.harness.isolation.sandbox import SandboxSettings, planned_isolation
from evaluation.harness.results import SCHEMA_PATH
from tests.paths import FIXTURE_RELEASE, REPO, SAMPLE_CANDIDATES


def evaluate(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaluation", "evaluate", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", **(env or {})})


def test_it_prints_the_table_and_writes_a_schema_valid_json(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = evaluate("--release", str(FIXTURE_RELEASE), "--operator", "gemm_fp16",
                    "--candidate", str(SAMPLE_CANDIDATES / "gemm_fp16" / "triton_native.py"),
                    "--shapes", "dev-*", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    for header in ("shape", "status", "max error", "time", "SOL", "attainment", "verdict"):
        assert header in proc.stdout
    # the JSON keeps the record; the table never calls a CPU run native
    assert proc.stdout.count("unverified-cpu") == 2 and "native" not in proc.stdout
    assert "not timed" in proc.stdout
    result = json.loads(out.read_text())
    jsonschema.validate(result, json.loads(SCHEMA_PATH.read_text()))
    assert [s["shape_id"] for s in result["shapes"]] == ["dev-m16-n64-k256", "dev-m48-n80-k144"]
    assert result["hardware"] == "H200"
    assert all(s["roofline"]["sol_s"] > 0 for s in result["shapes"])


def test_a_failing_candidate_is_not_a_harness_error() -> None:
    proc = evaluate("--release", str(FIXTURE_RELEASE), "--operator", "rms_norm",
                    "--candidate", str(SAMPLE_CANDIDATES / "rms_norm" / "wrong.py"),
                    "--shapes", "dev-t4-h256")
    assert proc.returncode == 0
    assert "failed (correctness)" in proc.stdout and "elements wrong" in proc.stdout


def test_an_unknown_operator_exits_2_with_the_known_ones() -> None:
    proc = evaluate("--release", str(FIXTURE_RELEASE), "--operator", "nope",
                    "--candidate", str(SAMPLE_CANDIDATES / "rms_norm" / "wrong.py"))
    assert proc.returncode == 2
    assert "no such operator" in proc.stderr and "rms_norm" in proc.stderr


def test_an_unknown_shape_pattern_exits_2() -> None:
    proc = evaluate("--release", str(FIXTURE_RELEASE), "--operator", "rms_norm",
                    "--candidate", str(SAMPLE_CANDIDATES / "rms_norm" / "wrong.py"),
                    "--shapes", "xyz*")
    assert proc.returncode == 2 and "no shape matches 'xyz*'" in proc.stderr


def test_a_release_that_is_not_atrex_layout_exits_2(tmp_path: Path) -> None:
    proc = evaluate("--release", str(tmp_path), "--operator", "rms_norm",
                    "--candidate", str(SAMPLE_CANDIDATES / "rms_norm" / "wrong.py"))
    assert proc.returncode == 2 and "data/" in proc.stderr


@pytest.mark.skipif(not planned_isolation(SandboxSettings(), ()).private_root,
                    reason="needs root for the sandbox's uid switch (CI and GPU hosts have it)")
def test_it_runs_the_candidate_as_the_uid_in_atrex_sandbox_uid(tmp_path: Path) -> None:
    """60001 has no passwd entry (as a per-worker uid usually has not): the child still
    runs, and a candidate asking who it is (as torch's cache paths do) gets an answer."""
    with pytest.raises(KeyError):
        pwd.getpwuid(60001)
    candidate = tmp_path / "candidate.py"
    candidate.write_text((SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_text()
                         + "\nimport getpass\n_WHO = getpass.getuser()\n")
    out = tmp_path / "result.json"
    proc = evaluate("--release", str(FIXTURE_RELEASE), "--operator", "rms_norm",
                    "--candidate", str(candidate), "--shapes", "dev-*", "--json", str(out),
                    env={"ATREX_SANDBOX_UID": "60001", "ATREX_SANDBOX_GID": "60001"})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["isolation"]["uid"] == 60001
    assert [(s["status"], s["adoption"]["verdict"]) for s in result["shapes"]] == \
        [("passed", "native")] * 2


def check_release_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaluation", "check-release", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "CUDA_VISIBLE_DEVICES": ""})


def test_check_release_exits_1_on_problems_2_on_a_broken_release_and_wants_a_gpu_for_cuda(
        tmp_path: Path) -> None:
    ok = check_release_cli("--release", str(FIXTURE_RELEASE))
    assert ok.returncode == 0, ok.stderr
    assert "6 operators" in ok.stderr and "0 problems in the files" in ok.stderr
    broken = tmp_path / "broken"
    shutil.copytree(FIXTURE_RELEASE, broken)
    (broken / "data" / "rms_norm" / "input.py").unlink()
    refused = check_release_cli("--release", str(broken))
    assert refused.returncode == 2 and "data/rms_norm/input.py" in refused.stderr
    wrong_keys = tmp_path / "wrong-keys"
    shutil.copytree(FIXTURE_RELEASE, wrong_keys)
    source = (wrong_keys / "data" / "rms_norm" / "input.py").read_text()
    (wrong_keys / "data" / "rms_norm" / "input.py").write_text(
        source.replace('"weight"', '"w"'))
    problems = check_release_cli("--release", str(wrong_keys))
    assert problems.returncode == 1 and "problem: data/rms_norm/shapes.json" in problems.stderr
    no_gpu = check_release_cli("--release", str(FIXTURE_RELEASE), "--device", "cuda")
    assert no_gpu.returncode == 2 and "--device cuda: no GPU here" in no_gpu.stderr
