"""`atrex` for agents' loops, as a subprocess against a live portal: token scopes refused,
JSON on stdout for every outcome, cancel and the submission list, --strict, and `atrex loop`
with a scripted generator on the CPU portal (acceptance, rejection, dropout, the audit)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from atrex_cli import client
from leaderboard.services import weight_set_from_release
from portal.accounts.models import TokenScope, token_create
from submissions.models import Submission
from tests.cli.helpers import NATIVE, atrex
from tests.paths import REPO, SAMPLE_CANDIDATES
from tests.worker import pipeline_workers
from tests.world import World

pytestmark = [pytest.mark.django_db(transaction=True)]

SUBMIT = ("submit", str(NATIVE), "--operator", "rms_norm", "--release", "atrex-fixture",
          "--hardware", "H200")


@pytest.fixture
def portal(live_server: Any, tmp_path: Path, world: World) -> dict[str, Any]:
    weight_set_from_release(world.release)
    tokens = {scope: token_create(team=world.red, name=scope, created_by=world.ruby,
                                  scope=scope)[1] for scope in TokenScope.values}
    return {"url": live_server.url, "home": tmp_path / "home", **tokens}


def test_a_checks_only_token_is_refused_a_ranked_submission_with_json_on_stdout(
        portal: dict[str, Any]) -> None:
    run = atrex(portal, *SUBMIT, "--format", "json", token=portal["check"])
    assert run.returncode == client.EXIT_AUTH
    error = json.loads(run.stdout)["error"]
    assert error["kind"] == "auth" and error["exit_code"] == client.EXIT_AUTH
    assert "checks only" in error["message"] and "error:" in run.stderr
    assert not Submission.objects.exists()


def test_cancel_list_and_every_outcome_as_json(portal: dict[str, Any]) -> None:
    made = atrex(portal, *SUBMIT, "--check", "--harness", "codex", "--tokens-in", "77",
                 "--format", "json", token=portal["check"])
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert created["mode"] == "check" and created["harness"] == "codex"
    assert created["input_tokens"] == 77

    # No worker: the wait times out, and stdout still says which submission and where it is.
    waited = atrex(portal, "status", str(created["id"]), "--wait", "--wait-timeout", "1",
                   "--interval", "0.5", "--format", "json", token=portal["read"])
    assert waited.returncode == client.EXIT_WAIT_TIMEOUT
    timed_out = json.loads(waited.stdout)
    assert timed_out["id"] == created["id"] and timed_out["wait_timed_out"] is True

    listed = atrex(portal, "submissions", "--format", "json", token=portal["read"])
    assert [s["id"] for s in json.loads(listed.stdout)] == [created["id"]]
    refused = atrex(portal, "cancel", str(created["id"]), "--format", "json",
                    token=portal["read"])
    assert refused.returncode == client.EXIT_AUTH and "read-only" in refused.stdout
    cancelled = atrex(portal, "cancel", str(created["id"]), "--format", "json",
                      token=portal["check"])
    assert cancelled.returncode == 0
    assert {j["status"] for j in json.loads(cancelled.stdout)["jobs"]} == {"cancelled"}
    status = atrex(portal, "status", str(created["id"]), "--strict", "--format", "json",
                   token=portal["read"])
    assert status.returncode == client.EXIT_NOT_EVALUATED  # ended before any shape ran
    missing = atrex(portal, "status", "999999", "--format", "json", token=portal["read"])
    assert json.loads(missing.stdout)["error"]["kind"] == "not-found"


@override_settings(ATREX_SHAPE_FILTER="dev-*")
def test_strict_fails_a_submission_that_falls_back_to_torch(portal: dict[str, Any],
                                                            tmp_path: Path) -> None:
    fallback = SAMPLE_CANDIDATES / "rms_norm" / "torch_fallback.py"
    with pipeline_workers(tmp_path):
        run = atrex(portal, "submit", str(fallback), "--operator", "rms_norm", "--release",
                    "atrex-fixture", "--hardware", "H200", "--check", "--wait", "--strict",
                    "--interval", "0.5", "--format", "json", token=portal["check"])
    assert run.returncode == client.EXIT_NOT_STRICT, run.stderr
    detail = json.loads(run.stdout)
    assert detail["outcome"]["correct"] == 2 and detail["outcome"]["native"] == 0


@override_settings(ATREX_SHAPE_FILTER="dev-*")
def test_loop_accepts_rejects_drops_out_and_keeps_the_audit_trail(
        portal: dict[str, Any], tmp_path: Path, world: World) -> None:
    samples = SAMPLE_CANDIDATES / "rms_norm"
    variant = tmp_path / "native_again.py"  # the same kernel, another source
    variant.write_text(NATIVE.read_text() + "\n# a revision that changes nothing measurable\n")
    replay = [samples / "wrong.py", NATIVE, samples / "torch_fallback.py", variant, NATIVE]
    generator = f"{sys.executable} {REPO / 'tests' / 'cli' / 'loop_replay.py'}"
    workdir = tmp_path / "loop"
    with pipeline_workers(tmp_path):
        run = atrex(portal, "loop", "--release", "atrex-fixture", "--operator", "rms_norm",
                    "--hardware", "H200", "--generator", generator, "--rounds", "6",
                    "--patience", "2", "--workdir", str(workdir), "--agent", "replay",
                    token=portal["check"], extra_env={"REPLAY_FILES": ":".join(
                        str(p) for p in replay)})
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["accepted"] == [2] and summary["rejected"] == [1, 3, 4, 5, 6]
    assert summary["dropouts"] == 1 and summary["best"]["round"] == 2
    assert (workdir / "best.py").read_text() == NATIVE.read_text()

    trail = [json.loads(line) for line in (workdir / "audit.jsonl").read_text().splitlines()]
    rounds = {e["round"]: e for e in trail if e["event"] == "round"}
    assert rounds[1]["reason"].startswith("incorrect: 2 of 2 shapes failed")
    assert rounds[2]["reason"].startswith("the first correct and native kernel")
    assert rounds[3]["reason"].startswith("not native: 2 of 2 shapes")
    assert rounds[4]["reason"].startswith("correct and native, but not timed")
    assert rounds[5]["reason"] == "a source already tried (round 2): not submitted"
    assert rounds[6]["reason"].startswith("no candidate")
    assert [e["round"] for e in trail if e["event"] == "dropout"] == [5]  # after 3 and 4
    assert rounds[2]["input_tokens"] == 2000 and rounds[2]["output_tokens"] == 200

    # The restarted generator got the best and the audit's summary, not the recent rounds.
    fresh = json.loads((workdir / "rounds" / "005" / "seen.json").read_text())
    assert fresh["fresh_context"] is True and fresh["history"] == []
    assert "best: round 2" in fresh["audit_summary"]
    assert Path(fresh["best"]["path"]).read_text() == NATIVE.read_text()
    assert fresh["feedback"]["operators"][0]["shapes"][0]["kernels"] is not None
    ordinary = json.loads((workdir / "rounds" / "004" / "seen.json").read_text())
    assert ordinary["fresh_context"] is False and [h["round"] for h in ordinary["history"]] == \
        [1, 2, 3]
    assert ordinary["feedback"]["operators"][0]["shapes"][0]["verdict"] == "fallback-torch"

    submissions = list(Submission.objects.order_by("pk"))
    assert len(submissions) == 4 and {s.mode for s in submissions} == {"check"}
    assert {(s.harness, s.agent, s.model_name) for s in submissions} == {
        ("atrex-loop", "replay", "replay-1")}
