"""The `atrex` client as a user runs it: a subprocess against a live portal (pytest-django's
live_server), with a real Celery worker where an evaluation has to happen."""

from __future__ import annotations

import json
import socket
import stat
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from atrex_cli import client
from leaderboard.services import weight_set_from_release
from portal.accounts.models import Team, token_create
from submissions.models import Submission
from tests.cli.helpers import NATIVE, atrex
from tests.paths import FIXTURE_RELEASE, SAMPLE_CANDIDATES
from tests.worker import celery_worker
from tests.world import World

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("cpu_shapes")]

SUBMIT_NATIVE = ("submit", str(NATIVE), "--operator", "rms_norm", "--release", "atrex-fixture")


@pytest.fixture
def cpu_shapes() -> Any:
    with override_settings(ATREX_SHAPE_FILTER="dev-*"):
        yield


@pytest.fixture
def portal(live_server: Any, tmp_path: Path, world: World) -> dict[str, Any]:
    """The shared world served live; Red's and Blue's tokens."""
    weight_set_from_release(world.release)
    _, token = token_create(team=world.red, name="cli", created_by=world.ruby)
    _, blue_token = token_create(team=world.blue, name="cli", created_by=world.bert)
    return {"url": live_server.url, "release": world.release, "team": world.red, "token": token,
            "blue_token": blue_token, "home": tmp_path / "home"}


def test_submit_wait_follows_a_real_evaluation_to_scored(portal: dict[str, Any],
                                                         tmp_path: Path) -> None:
    # Two workers, as `make run` starts them: results are stored while the job still runs.
    with celery_worker("results", tmp_path / "results.log"), \
            celery_worker("eval.H200", tmp_path / "worker.log"):
        run = atrex(portal, *SUBMIT_NATIVE, "--hardware", "H200", "--agent", "test-agent",
                    "--model", "test-model", "--tokens", "4321", "--wait", "--interval", "0.5",
                    token=portal["token"])
    log = (tmp_path / "worker.log").read_text()
    assert run.returncode == client.EXIT_OK, f"{run.stderr}\n{log[-3000:]}"
    assert "uploading triton_native.py" in run.stderr and "created for Red" in run.stderr
    # Not a terminal: a line per change of the job, as the portal reported it while it ran.
    progress = [line for line in run.stderr.splitlines() if line.startswith("rms_norm: ")]
    assert progress[0] in ("rms_norm: queued 0/2", "rms_norm: running 0/2"), progress
    assert any(line.startswith("rms_norm: running") for line in progress)
    assert progress[-1] == "rms_norm: scored 2/2"
    table = run.stdout
    assert "): scored: 2 of 2 shapes correct (interpreter check)" in table
    assert "rms_norm" in table and "2/2" in table and "unverified-cpu 2" in table
    assert "S_agg not timed under weights v1" in table  # correct, no GPU time: not 0
    assert "interpreter check: Triton's CPU interpreter ran this, not a GPU" in table

    submission_id = int(table.split("submission ")[1].split()[0])
    status = atrex(portal, "status", str(submission_id), "--format", "json",
                   token=portal["token"])
    detail = json.loads(status.stdout)
    assert status.returncode == 0 and detail["status"] == "scored"
    assert detail["agent"] == "test-agent" and detail["output_tokens"] == 4321
    assert detail["score"]["current"] and "rms_norm" in detail["score"]["by_operator"]
    assert [r["verdict"] for r in detail["jobs"][0]["results"]] == ["unverified-cpu"] * 2

    # Without a GPU the worker ran Triton's interpreter: a check, never ranked on a board.
    board = atrex(portal, "leaderboard", "atrex-fixture", "--hardware", "H200", "--format", "json")
    assert board.returncode == 0 and json.loads(board.stdout)["rows"] == []
    csv = atrex(portal, "leaderboard", "--format", "csv")  # the only release, H200
    assert csv.stdout.splitlines()[0].startswith("rank,team,submission,dsl,aggregate")
    assert f",Red,{submission_id}," not in csv.stdout
    per_operator = atrex(portal, "leaderboard", "--operator", "rms_norm")
    assert per_operator.returncode == 0 and "operator rms_norm" in per_operator.stdout
    assert "no ranked submissions yet" in per_operator.stdout
    decode = atrex(portal, "leaderboard", "--phase", "decode", "--format", "json")
    assert json.loads(decode.stdout)["board"] == "decode"


def test_submit_wait_exits_9_and_prints_every_shapes_error_when_no_shape_is_correct(
        portal: dict[str, Any], tmp_path: Path) -> None:
    wrong = SAMPLE_CANDIDATES / "rms_norm" / "wrong.py"
    with celery_worker("results", tmp_path / "results.log"), \
            celery_worker("eval.H200", tmp_path / "worker.log"):
        run = atrex(portal, "submit", str(wrong), "--operator", "rms_norm", "--release",
                    "atrex-fixture", "--hardware", "H200", "--wait", "--interval", "0.5",
                    token=portal["token"])
    log = (tmp_path / "worker.log").read_text()
    assert run.returncode == client.EXIT_EVALUATION_FAILED, f"{run.stderr}\n{log[-3000:]}"
    assert "): failed: 0 of 2 shapes correct (interpreter check)" in run.stdout
    errors = [line for line in run.stdout.splitlines() if line.startswith("rms_norm / ")]
    assert [line.split(":")[0] for line in errors] == ["rms_norm / dev-t4-h256",
                                                       "rms_norm / dev-t3-h200"]
    assert all("correctness failed: " in line for line in errors), errors
    row = next(line for line in run.stdout.splitlines() if line.startswith("│ rms_norm"))
    assert "correctness failed" in row  # the table's error column is not empty

    submission_id = run.stdout.split("submission ")[1].split()[0]
    status = atrex(portal, "status", submission_id, "--format", "json", token=portal["token"])
    assert status.returncode == client.EXIT_EVALUATION_FAILED
    detail = json.loads(status.stdout)
    assert detail["status"] == "scored" and detail["outcome"]["status"] == "failed"


def test_status_exits_12_for_a_submission_cancelled_before_any_shape(
        portal: dict[str, Any]) -> None:
    created = atrex(portal, *SUBMIT_NATIVE, "--hardware", "H200", token=portal["token"])
    submission_id = created.stdout.strip()
    waiting = atrex(portal, "status", submission_id, token=portal["token"])
    assert waiting.returncode == client.EXIT_OK  # still queued: nothing has failed
    cancel = urllib.request.Request(f"{portal['url']}/api/submissions/{submission_id}/cancel/",
                                    method="POST",
                                    headers={"Authorization": f"Bearer {portal['token']}"})
    with urllib.request.urlopen(cancel) as answer:
        assert answer.status == 200
    status = atrex(portal, "status", submission_id, token=portal["token"])
    assert status.returncode == client.EXIT_NOT_EVALUATED
    assert "cancelled: 0 of 2 shapes correct, 2 not evaluated" in status.stdout


def test_problems_lists_releases_and_their_operators(portal: dict[str, Any]) -> None:
    listing = atrex(portal, "problems")
    assert listing.returncode == 0 and "atrex-fixture@v1" in listing.stdout
    operators = atrex(portal, "problems", "atrex-fixture@v1", "--format", "json")
    doc = json.loads(operators.stdout)
    names = sorted(portal["release"].operators.values_list("name", flat=True))
    assert [o["name"] for o in doc["operators"]] == names
    rms = next(o for o in doc["operators"] if o["name"] == "rms_norm")
    assert "dev-t4-h256" in rms["shapes"]


def test_bundle_writes_the_public_files_only(portal: dict[str, Any], tmp_path: Path) -> None:
    run = atrex(portal, "bundle", "atrex-fixture", "rms_norm", "-o", str(tmp_path / "b"))
    assert run.returncode == 0, run.stderr
    root = tmp_path / "b" / "atrex-fixture"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == ["data/rms_norm/input.py", "data/rms_norm/reference.py",
                     "data/rms_norm/shapes.json", "release.json", "tolerances.json"]
    assert (root / "data/rms_norm/reference.py").read_text() == \
        (FIXTURE_RELEASE / "data/rms_norm/reference.py").read_text()
    assert json.loads((root / "release.json").read_text())["dsl"] == "triton"


def test_login_stores_the_token_privately_and_later_commands_use_it(
        portal: dict[str, Any]) -> None:
    login = atrex(portal, "login", "--token", portal["token"])
    assert login.returncode == 0 and "as team Red" in login.stderr
    path = portal["home"] / "config" / "atrex" / "config.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert portal["token"] in path.read_text() and portal["url"] in path.read_text()
    quota = atrex(portal, "quota")  # no ATREX_TOKEN: the stored one
    assert quota.returncode == 0 and json.loads(quota.stdout)["team"] == "Red"
    assert atrex(portal, "logout").returncode == 0
    assert portal["token"] not in path.read_text()
    assert atrex(portal, "quota").returncode == client.EXIT_AUTH


def test_a_bad_or_missing_token_exits_with_the_auth_code(portal: dict[str, Any]) -> None:
    missing = atrex(portal, *SUBMIT_NATIVE, "--hardware", "H200")
    assert missing.returncode == client.EXIT_AUTH and "atrex login" in missing.stderr
    bad = atrex(portal, *SUBMIT_NATIVE, "--hardware", "H200", token="atx_not-a-token")
    assert bad.returncode == client.EXIT_AUTH
    assert "invalid or revoked token" in bad.stderr
    login = atrex(portal, "login", "--token", "atx_not-a-token")
    assert login.returncode == client.EXIT_AUTH
    assert not (portal["home"] / "config" / "atrex" / "config.toml").exists()


def test_an_exhausted_quota_exits_with_the_quota_code(portal: dict[str, Any]) -> None:
    Team.objects.filter(pk=portal["team"].pk).update(daily_submission_quota=0)
    run = atrex(portal, *SUBMIT_NATIVE, "--hardware", "H200", token=portal["token"])
    assert run.returncode == client.EXIT_QUOTA, run.stderr
    assert "daily quota of 0 submissions used" in run.stderr


def test_a_rejected_upload_prints_the_portals_message(portal: dict[str, Any],
                                                      tmp_path: Path) -> None:
    broken = tmp_path / "rms_norm.py"
    broken.write_text("class Model(:\n")
    run = atrex(portal, "submit", str(broken), "--release", "atrex-fixture", "--hardware",
                "H200", token=portal["token"])
    assert run.returncode == client.EXIT_REJECTED
    assert "rms_norm.py: syntax error on line 1" in run.stderr
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "no_such_op.py").write_text("class Model: pass\n")
    run = atrex(portal, "submit", str(folder), "--release", "atrex-fixture", "--hardware",
                "H200", token=portal["token"])
    assert run.returncode == client.EXIT_REJECTED
    assert "no operator named 'no_such_op'" in run.stderr


def test_what_does_not_exist_exits_with_the_not_found_code(portal: dict[str, Any]) -> None:
    assert atrex(portal, "status", "999999",
                 token=portal["token"]).returncode == client.EXIT_NOT_FOUND
    release = atrex(portal, "problems", "no-such-release")
    assert release.returncode == client.EXIT_NOT_FOUND and "atrex-fixture@v1" in release.stderr
    hardware = atrex(portal, "leaderboard", "atrex-fixture", "--hardware", "B999")
    assert hardware.returncode == client.EXIT_NOT_FOUND
    upload = atrex(portal, *SUBMIT_NATIVE, "--hardware", "B999", token=portal["token"])
    assert upload.returncode == client.EXIT_NOT_FOUND
    # refused before the upload: the known profiles named, nothing sent, nothing stored
    assert "no hardware profile 'B999' on this portal (known: H100, H20, H200" in upload.stderr
    assert "nothing was uploaded" in upload.stderr and "uploading" not in upload.stderr
    assert not Submission.objects.exists()


def test_another_teams_submission_is_not_found(portal: dict[str, Any]) -> None:
    created = atrex(portal, *SUBMIT_NATIVE, "--hardware", "H200", token=portal["token"])
    assert created.returncode == 0, created.stderr
    submission_id = created.stdout.strip()
    own = atrex(portal, "status", submission_id, token=portal["token"])
    assert own.returncode == 0 and "rms_norm" in own.stdout and "queued" in own.stdout
    other = atrex(portal, "status", submission_id, token=portal["blue_token"])
    assert other.returncode == client.EXIT_NOT_FOUND


def test_an_unreachable_server_exits_with_its_own_code(portal: dict[str, Any]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"  # bound, never listening
        run = atrex(portal, "problems", server=closed)
    assert run.returncode == client.EXIT_UNREACHABLE
    assert f"cannot reach the portal at {closed}" in run.stderr


def test_evaluate_local_runs_the_public_checks_on_a_bundle_from_the_portal(
        portal: dict[str, Any]) -> None:
    run = atrex(portal, "evaluate-local", str(NATIVE), "--operator", "rms_norm", "--release", "atrex-fixture",
                "--operator", "rms_norm")
    assert run.returncode == client.EXIT_OK, run.stderr
    assert "2/2 shapes correct, 2/2 without torch work the interpreter saw: unverified on " \
        "CPU" in run.stderr and "cpu-interpreter" in run.stdout
    assert run.stdout.count("unverified-cpu") == 2 and "native" not in run.stdout
    assert "not timed" in run.stdout
    cached = portal["home"] / "cache" / "atrex" / "bundles" / "atrex-fixture-v1"
    assert not list(cached.rglob("roofline.json")) and not list(cached.rglob("metadata.json"))


def test_evaluate_local_exits_9_when_a_shape_would_not_score(portal: dict[str, Any]) -> None:
    run = atrex(portal, "evaluate-local",
                str(SAMPLE_CANDIDATES / "rms_norm" / "torch_fallback.py"),
                "--release", str(FIXTURE_RELEASE), "--operator", "rms_norm",
                "--shapes", "dev-t4-h256")
    assert run.returncode == client.EXIT_EVALUATION_FAILED, run.stderr
    assert "1/1 shapes correct, 0/1 without torch work" in run.stderr and "fallback-torch" in run.stdout


def test_evaluate_local_refuses_a_syntax_error_before_the_harness_and_names_the_file(
        portal: dict[str, Any], tmp_path: Path) -> None:
    broken = tmp_path / "my_norm.py"
    broken.write_text("import torch\n\nclass Model(:\n")
    run = atrex(portal, "evaluate-local", str(broken), "--release", str(FIXTURE_RELEASE),
                "--operator", "rms_norm")
    assert run.returncode == client.EXIT_REJECTED, run.stderr
    assert f"{broken}: syntax error on line 3" in run.stderr
    assert "nothing was evaluated" in run.stderr
    assert "shapes correct" not in run.stderr and "candidate.py" not in run.stderr



def test_evaluate_local_refuses_a_file_without_model_before_the_harness(
        portal: dict[str, Any], tmp_path: Path) -> None:
    nameless = tmp_path / "rms_norm.py"
    nameless.write_text("import torch\n\nclass MyNorm(torch.nn.Module):\n    pass\n")
    run = atrex(portal, "evaluate-local", str(nameless), "--release", str(FIXTURE_RELEASE),
                "--operator", "rms_norm")
    assert run.returncode == client.EXIT_REJECTED, run.stderr
    assert f"{nameless} defines no class Model (or ModelNew); nothing was evaluated" in run.stderr
    assert "shapes correct" not in run.stderr  # the harness never started


def test_problems_says_what_this_portal_evaluates_and_which_version_a_name_means(
        portal: dict[str, Any]) -> None:
    from evaluation.catalog.capability import worker_announced

    worker_announced({"worker": "eval@cpu", "queues": ["eval.H200"], "mode": "cpu-interpreter",
                      "device": "cpu", "dsls": ["triton"]})
    listing = atrex(portal, "problems")
    assert listing.returncode == 0, listing.stderr
    assert "This portal has no GPU worker: it checks atrex-fixture on the dev tier" in (
        listing.stderr)
    row = next(line for line in listing.stdout.splitlines() if "atrex-fixture@v1" in line)
    assert "checks on H200 (CPU)" in row
    doc = json.loads(atrex(portal, "problems", "--format", "json").stdout)
    assert doc[0]["checked_on"] == ["H200"] and doc[0]["evaluated_shapes"] > 0
    named = atrex(portal, "problems", "atrex-fixture")
    assert "atrex-fixture means atrex-fixture@v1, its newest version" in named.stderr
