"""`atrex history` and `atrex compare` as a user runs them: a subprocess against a live portal
holding scored submissions (stored results, as after evaluations on a GPU)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from atrex_cli import client
from leaderboard.services import weight_set_from_release
from portal.accounts.models import token_create
from tests.builders import KERNEL, SHAPES, scored_kernels
from tests.cli.helpers import atrex
from tests.world import World

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def served(live_server: Any, tmp_path: Path, world: World) -> dict[str, Any]:
    """Red: rms_norm twice (the second faster, its source changed); Blue: rms_norm once."""
    release, red, blue = world.release, world.red, world.blue
    weight_set_from_release(release)
    first = scored_kernels(red, release, {"rms_norm": (KERNEL.format(factor=2), 0.4)}, seconds=10e-6,
                           minutes_ago=10)
    second = scored_kernels(red, release, {"rms_norm": (KERNEL.format(factor=3), 0.7)}, seconds=8e-6)
    theirs = scored_kernels(blue, release, {"rms_norm": (KERNEL.format(factor=4), 0.9)})
    _, red_token = token_create(team=red, name="cli", created_by=world.ruby)
    _, blue_token = token_create(team=blue, name="cli", created_by=world.bert)
    return {"url": live_server.url, "home": tmp_path / "home", "first": first.pk,
            "second": second.pk, "theirs": theirs.pk, "token": red_token,
            "blue_token": blue_token}


def test_history_prints_the_teams_scores_of_an_operator_oldest_first(
        served: dict[str, Any]) -> None:
    run = atrex(served, "history", "rms_norm", "--format", "json", token=served["token"])
    assert run.returncode == client.EXIT_OK, run.stderr
    doc = json.loads(run.stdout)
    assert [e["submission"] for e in doc["entries"]] == [served["first"], served["second"]]
    assert [e["s_op"] for e in doc["entries"]] == pytest.approx([0.4, 0.7])
    table = atrex(served, "history", "rms_norm", token=served["token"]).stdout
    assert "rms_norm: Red's submissions, oldest first" in table
    assert table.index("0.400") < table.index("0.700") and "changed" in table
    assert f"best S_op 0.700 (submission {served['second']})" in table
    blue = json.loads(atrex(served, "history", "rms_norm", "--format", "json",
                            token=served["blue_token"]).stdout)
    assert [e["submission"] for e in blue["entries"]] == [served["theirs"]]


def test_history_narrows_to_a_release_and_hardware(served: dict[str, Any]) -> None:
    run = atrex(served, "history", "rms_norm", "--release", "atrex-fixture@v1", "--hardware",
                "H100", token=served["token"])
    assert run.returncode == client.EXIT_OK, run.stderr
    assert "the team has not submitted rms_norm yet" in run.stdout


def test_history_of_an_unknown_operator_or_without_a_token_fails_with_its_code(
        served: dict[str, Any]) -> None:
    unknown = atrex(served, "history", "layer_norm", token=served["token"])
    assert unknown.returncode == client.EXIT_NOT_FOUND
    assert "no operator named 'layer_norm'" in unknown.stderr
    assert atrex(served, "history", "rms_norm").returncode == client.EXIT_AUTH


def test_compare_prints_per_shape_deltas_and_the_source_diff(served: dict[str, Any]) -> None:
    first, second = str(served["first"]), str(served["second"])
    run = atrex(served, "compare", first, second, "--diff", token=served["token"])
    assert run.returncode == client.EXIT_OK, run.stderr
    assert "+0.300" in run.stdout  # S_op and each shape's attainment
    assert run.stdout.count("1.25x") == SHAPES and "10.00" in run.stdout
    assert "-        return x * 2" in run.stdout and "+        return x * 3" in run.stdout
    doc = json.loads(atrex(served, "compare", first, second, "--format", "json",
                           token=served["token"]).stdout)
    [rms] = doc["operators"]
    assert [s["attainment_delta"] for s in rms["shapes"]] == pytest.approx([0.3] * SHAPES)
    assert rms["source_changed"] and "+        return x * 3" in rms["diff"]


def test_compare_with_another_teams_submission_is_not_found(served: dict[str, Any]) -> None:
    run = atrex(served, "compare", str(served["first"]), str(served["theirs"]),
                token=served["token"])
    assert run.returncode == client.EXIT_NOT_FOUND
