"""`atrex submit --check`, `atrex status --json` with the per-shape profile, and history and
compare marking what no board ranks, as a user runs them against a live portal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from atrex_cli import client
from leaderboard.services import weight_set_from_release
from portal.accounts.models import Team, token_create
from submissions.models import EvaluationJob, Submission
from tests.builders import KERNEL, scored_kernels
from tests.cli.helpers import NATIVE, atrex
from tests.reports import RMS_SHAPE, gpu_shape, gpu_submission, native
from tests.world import build_world

pytestmark = pytest.mark.django_db(transaction=True)

SUBMIT = ("submit", str(NATIVE), "--operator", "rms_norm", "--release", "atrex-fixture",
          "--hardware", "H200")


@pytest.fixture
def served(live_server: Any, tmp_path: Path) -> Any:
    with override_settings(ATREX_SHAPE_FILTER="dev-*"):
        world = build_world()
        weight_set_from_release(world.release)
        _, token = token_create(team=world.red, name="cli", created_by=world.ruby)
        yield {"url": live_server.url, "home": tmp_path / "home", "team": world.red,
               "token": token, "release": world.release}


def test_submit_check_makes_a_check_and_status_labels_it(served: dict[str, Any]) -> None:
    run = atrex(served, *SUBMIT, "--check", "--format", "json", token=served["token"])
    assert run.returncode == client.EXIT_OK, run.stderr
    created = json.loads(run.stdout)
    assert created["mode"] == "check" and created["outcome"]["check"] is True
    assert f"\ncheck submission {created['id']} created for Red" in run.stderr
    assert Submission.objects.get(pk=created["id"]).mode == "check"
    table = atrex(served, "status", str(created["id"]), token=served["token"]).stdout
    assert "(check mode)" in table and "check mode: evaluated like any submission" in table
    quota = json.loads(atrex(served, "quota", token=served["token"]).stdout)
    assert (quota["used_today"], quota["checks_today"]) == (0, 1)


def test_an_exhausted_check_quota_exits_with_the_quota_code(served: dict[str, Any]) -> None:
    Team.objects.filter(pk=served["team"].pk).update(daily_check_quota=0)
    run = atrex(served, *SUBMIT, "--check", token=served["token"])
    assert run.returncode == client.EXIT_QUOTA
    assert "daily quota of 0 check submissions used" in run.stderr
    assert atrex(served, *SUBMIT, token=served["token"]).returncode == client.EXIT_OK


def test_status_json_carries_the_per_shape_profile(served: dict[str, Any]) -> None:
    with override_settings(ATREX_SHAPE_FILTER=""):
        submission = gpu_submission(served["team"], {"rms_norm": native("rms_norm")}, {
            "rms_norm": [gpu_shape(RMS_SHAPE, median_s=20e-6, kernels=[
                ("_rms_norm_kernel", "dsl", 1, 15.0), ("Memset (Device)", "torch", 1, 5.0)])]})
    run = atrex(served, "status", str(submission.pk), "--json", token=served["token"])
    assert run.returncode == client.EXIT_OK, run.stderr
    doc = json.loads(run.stdout)
    assert doc["id"] == submission.pk and doc["profile"]["submission"] == submission.pk
    [shape] = doc["profile"]["operators"][0]["shapes"]
    assert shape["shape_id"] == RMS_SHAPE and shape["bound"] == "memory"
    assert [(k["name"], k["share"]) for k in shape["kernels"]] == [
        ("_rms_norm_kernel", pytest.approx(0.75)), ("Memset (Device)", pytest.approx(0.25))]
    assert shape["bandwidth_fraction"] == pytest.approx(shape["attainment"])
    # both times, in the job's results and in the profile, and what they were measured with
    [result] = doc["jobs"][0]["results"]
    assert result["median_s"] == pytest.approx(20e-6)
    assert result["wall_median_s"] == pytest.approx(35e-6)
    assert shape["wall_median_s"] == pytest.approx(35e-6)
    assert shape["environment"]["gpu"] == "NVIDIA H200"
    same = json.loads(atrex(served, "status", str(submission.pk), "--format", "json",
                            token=served["token"]).stdout)
    assert same["profile"] == doc["profile"]


def test_history_and_compare_say_not_timed_and_mark_checks_and_interpreter_runs(
        served: dict[str, Any]) -> None:
    team, release = served["team"], served["release"]
    timed = scored_kernels(team, release, {"rms_norm": (KERNEL.format(factor=2), 0.4)}, seconds=10e-6,
                           minutes_ago=10)
    untimed = scored_kernels(team, release, {"rms_norm": (KERNEL.format(factor=3), None)})
    Submission.objects.filter(pk=untimed.pk).update(mode="check")
    EvaluationJob.objects.filter(candidate__submission=untimed).update(mode="cpu-interpreter")
    compare = atrex(served, "compare", str(timed.pk), str(untimed.pk), token=served["token"])
    assert compare.returncode == client.EXIT_OK, compare.stderr
    assert "not measured" not in compare.stdout
    rows = [line for line in compare.stdout.splitlines() if "dev-t" in line]
    assert rows and all("not timed" in row for row in rows)  # time B and attainment B
    title = " ".join(compare.stdout.split())  # the title may wrap
    assert f"submission {untimed.pk} (Red, atrex-fixture@v1, H200): scored (check, " \
           "interpreter), S_agg not timed" in title
    history = atrex(served, "history", "rms_norm", token=served["token"]).stdout
    line = next(line for line in history.splitlines() if f"│ {untimed.pk} " in line)
    assert "scored (check, interpreter)" in line and "not timed" in line
    assert "never ranked" in history
    doc = json.loads(atrex(served, "history", "rms_norm", "--format", "json",
                           token=served["token"]).stdout)
    assert [(e["mode"], e["interpreter"]) for e in doc["entries"]] == [
        ("ranked", False), ("check", True)]
