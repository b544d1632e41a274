"""What a visitor meets first: the front page (each release's headline board, its leaders
per operator, recent submissions, how to start), the boards index with row counts, boards
whose notices fold and whose rows say how many shapes they cover."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from evaluation.catalog.models import HardwareProfile
from leaderboard.overview import board_index, shape_coverage
from leaderboard.services import rescore_submission, weight_set_activate, weight_set_from_release
from submissions.models import EvaluationJob, ShapeResult, Submission
from submissions.services import baseline_team
from tests.builders import SHAPES, scored_kernels, scored_submission
from tests.world import World

pytestmark = pytest.mark.django_db


def ranked(world: World) -> tuple[Submission, Submission]:
    weight_set_from_release(world.release)
    red = scored_kernels(world.red, world.release, {"rms_norm": ("a", 0.8), "gemm_fp16": ("b", 0.4)})
    blue = scored_kernels(world.blue, world.release, {"rms_norm": ("c", 0.3)})
    return red, blue


def test_the_front_page_says_what_the_portal_is_and_shows_a_board_with_its_leaders(
        world: World) -> None:
    red, blue = ranked(world)
    page = Client().get("/").content.decode()
    assert "checks that each one is correct and really runs in its DSL" in page
    headline = page[page.index(f'id="headline-{world.release.pk}"'):]
    headline = headline[:headline.index("</section>")]
    assert "atrex-fixture v1 on H200" in headline and "2 teams" in headline
    teams = re.findall(r'<tr class="team-row"><td>(\d+)</td><td>([^<]+)', headline)
    assert teams == [("1", "Red"), ("2", "Blue")]
    leaders = json.loads(re.search(r'<script id="leaders-data" type="application/json">(.*?)'
                                   r"</script>", page, flags=re.S).group(1))
    by_operator = {row["operator"]: row for row in leaders[str(world.release.pk)]}
    assert by_operator["rms_norm"]["team"] == "Red"
    assert by_operator["rms_norm"]["score"] == pytest.approx(0.8)
    assert by_operator["gemm_fp16"]["team"] == "Red"
    assert by_operator["silu_and_mul"]["score"] is None  # no team submitted it
    activity = page[page.index('id="activity"'):]
    assert activity.index("Blue →") < activity.index("Red →")  # newest first
    assert 'id="cli-start"' in page and "atrex submit rms_norm.py --release atrex-fixture" in page


def test_a_release_without_rows_has_no_headline_and_checks_stay_off_the_front_page(
        world: World) -> None:
    weight_set_from_release(world.release)
    check = scored_kernels(world.red, world.release, {"rms_norm": ("a", 0.8)})
    Submission.objects.filter(pk=check.pk).update(mode=Submission.Mode.CHECK)
    page = Client().get("/").content.decode()
    assert 'id="no-boards"' in page and "Red →" not in page


def test_the_boards_index_counts_each_boards_rows_and_opens_the_fullest(world: World) -> None:
    ranked(world)
    baseline = scored_submission(world.release, baseline_team(), {"rms_norm": 0.1})
    Submission.objects.filter(pk=baseline.pk).update(baseline=Submission.Baseline.PYTORCH)
    rescore_submission(baseline)
    [row] = board_index()
    cells = {c.hardware: (c.teams, c.baselines) for c in row.cells}
    assert cells["H200"] == (2, 1) and cells["H100"] == (0, 0)
    assert row.best is not None and row.best.hardware == "H200"
    page = Client().get("/boards/").content.decode()
    assert f'class="open-board" href="/boards/{world.release.pk}/H200/"' in page
    assert re.search(r'data-hardware="H200" data-rows="3"><a href="/boards/\d+/H200/">2 teams'
                     r"<br>1 baseline</a>", page)


def test_a_board_row_says_how_many_of_each_operators_shapes_it_covers(world: World) -> None:
    red, _ = ranked(world)
    coverage = shape_coverage(world.release, [red.pk])[red.pk]
    scored_tier = {op.name: op.shapes.exclude(shape_id__startswith="dev-").count()
                   for op in world.release.operators.all()}
    assert coverage.covered == {"gemm_fp16": SHAPES, "rms_norm": SHAPES}
    assert coverage.totals == scored_tier
    assert coverage.text == f"{2 * SHAPES}/{sum(scored_tier.values())}"
    assert coverage.detail.startswith(f"gemm_fp16 {SHAPES}/{scored_tier['gemm_fp16']}, "
                                      f"rms_norm {SHAPES}/")  # the submitted first
    page = Client().get(f"/boards/{world.release.pk}/H200/").content.decode()
    cell = re.search(rf'<td data-label="Sub\u00admission" title="([^"]*)">#{red.pk}'
                     r'<small class="interval">([^<]*)</small></td>', page)
    assert cell is not None and cell.group(2) == f"{coverage.text} shapes"
    assert "rms_norm 3/" in cell.group(1)


def test_a_boards_notices_fold_so_the_table_comes_first(world: World) -> None:
    red, blue = ranked(world)
    Submission.objects.filter(pk=red.pk).update(environment="NVIDIA H200 · CUDA 13.0")
    ShapeResult.objects.filter(job__candidate__submission=blue).update(raw={"recorded": {
        "gpu": "NVIDIA H200", "date": "2026-12-02", "evaluator": "e", "source": "s.json"}})
    rescore_submission(blue)  # results are stored with their rescore (what boards keep of them)
    page = Client().get(f"/boards/{world.release.pk}/H200/").content.decode()
    # each notice one line (a summary), its details on demand; the table right after them
    provenance = re.search(r'<details class="notice" id="provenance"><summary>(.*?)</summary>'
                           r"(.*?)</details>", page, flags=re.S)
    assert provenance is not None and "recorded results" in provenance.group(1)
    assert "NVIDIA H200, 2026-12-02, e: s.json" in provenance.group(2)
    environments = re.search(r'<details class="legend" id="environments"><summary>(.*?)'
                             r"</summary>(.*?)</details>", page, flags=re.S)
    assert environments is not None and environments.group(1).startswith("Measured with")
    assert "NVIDIA H200 · CUDA 13.0" in environments.group(2)
    assert '<details class="legend" id="board-legend">' in page  # closed: no "open"


def test_a_baseline_run_in_the_interpreter_is_no_row_of_a_gpu_board(world: World) -> None:
    weight_set_from_release(world.release)
    baseline = scored_submission(world.release, baseline_team(), {"rms_norm": 0.1})
    Submission.objects.filter(pk=baseline.pk).update(baseline=Submission.Baseline.PYTORCH)
    EvaluationJob.objects.filter(candidate__submission=baseline).update(
        mode=EvaluationJob.Mode.INTERPRETER)
    rescore_submission(baseline)
    rows = Client().get(f"/api/boards/{world.release.pk}/H200/").json()
    assert rows["baselines"] == []
    EvaluationJob.objects.filter(candidate__submission=baseline).update(mode=EvaluationJob.Mode.GPU)
    rescore_submission(baseline)
    rows = Client().get(f"/api/boards/{world.release.pk}/H200/").json()
    assert [b["team"] for b in rows["baselines"]] == ["PyTorch reference"]


def test_an_empty_board_points_at_the_boards_with_rows(world: World) -> None:
    ranked(world)
    HardwareProfile.objects.get(name="H100")
    weight_set_activate(weight_set=world.release.weight_sets.get(), actor=None)
    page = Client().get(f"/boards/{world.release.pk}/H100/").content.decode()
    assert 'id="board-empty"' in page and 'href="/boards/"' in page
