"""Iterating on kernels: an operator's history across a team's submissions, and two
submissions compared shape by shape with the source diff (selectors, pages, API)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from evaluation.catalog.models import HardwareProfile
from leaderboard.iteration import (
    MAX_DIFF_LINES,
    diff_lines,
    operator_history,
    submission_compare,
    unified_diff,
)
from leaderboard.services import weight_set_from_release
from portal.accounts.models import Team, token_create
from submissions.models import Submission
from tests.builders import KERNEL, SHAPES, scored_kernels
from tests.factories import UserFactory
from tests.world import World, build_world, extended, signed_in

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class IterationWorld(World):
    """Red's rms_norm over three submissions (the source changed, then not) with a gemm_fp16
    submission between; Blue's rms_norm once, last."""
    first: Submission
    gemm_only: Submission
    second: Submission
    third: Submission
    theirs: Submission


@pytest.fixture
def world() -> IterationWorld:
    world = build_world()
    release, red, blue = world.release, world.red, world.blue
    weight_set_from_release(release)
    v1, v2 = KERNEL.format(factor=2), KERNEL.format(factor=3)
    first = scored_kernels(red, release, {"rms_norm": (v1, 0.4)}, minutes_ago=40)
    gemm_only = scored_kernels(red, release, {"gemm_fp16": (v1, 0.5)}, minutes_ago=30)
    second = scored_kernels(red, release, {"rms_norm": (v2, 0.7), "gemm_fp16": (v1, 0.5)},
                            minutes_ago=20)
    third = scored_kernels(red, release, {"rms_norm": (v2, 0.7)}, minutes_ago=10)
    theirs = scored_kernels(blue, release, {"rms_norm": (v1, 0.9)}, minutes_ago=5)
    return extended(world, IterationWorld, first=first, gemm_only=gemm_only, second=second,
                    third=third, theirs=theirs)


def token_client(team: Team) -> Client:
    _, raw = token_create(team=team, name="cli", created_by=None)
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


# History


def test_history_lists_the_teams_submissions_of_the_operator_oldest_first(
        world: IterationWorld) -> None:
    history = operator_history(team=world.red, operator="rms_norm")
    entries = history["entries"]
    assert [e["submission"] for e in entries] == [
        world.first.pk, world.second.pk, world.third.pk]  # not gemm_only, not Blue's
    assert [e["s_op"] for e in entries] == pytest.approx([0.4, 0.7, 0.7])
    assert [e["source_changed"] for e in entries] == [True, True, False]
    assert [e["previous"] for e in entries] == [None, world.first.pk, world.second.pk]
    assert entries[0]["correct"] == entries[0]["native"] == SHAPES
    assert entries[0]["verdicts"] == {"native": SHAPES} and entries[0]["status"] == "scored"
    assert not history["truncated"]


def test_history_keeps_the_newest_entries_when_limited(world: IterationWorld) -> None:
    history = operator_history(team=world.red, operator="rms_norm", limit=2)
    assert [e["submission"] for e in history["entries"]] == [world.second.pk,
                                                             world.third.pk]
    assert history["truncated"]


def test_history_counts_fallbacks_and_failures_by_verdict(world: IterationWorld) -> None:
    red, release = world.red, world.release
    scored_kernels(red, release, {"silu_and_mul": ("a", 0.6)}, verdict="fallback-torch", minutes_ago=3)
    scored_kernels(red, release, {"silu_and_mul": ("b", 0.0)}, status="failed", minutes_ago=2)
    fallback, failed = operator_history(team=red, operator="silu_and_mul")["entries"]
    assert (fallback["correct"], fallback["native"]) == (SHAPES, 0)
    assert fallback["verdicts"] == {"fallback-torch": SHAPES}
    assert fallback["s_op"] == 0.0  # the default policy: only native work scores
    assert fallback["correctness_rate"] == 1.0 and fallback["dsl_adoption_rate"] == 0.0
    assert (failed["correct"], failed["verdicts"]) == (0, {"failed": SHAPES})


def test_history_narrows_to_a_release_and_hardware(world: IterationWorld) -> None:
    on_h100 = scored_kernels(world.red, world.release, {"rms_norm": ("c", 0.3)}, hardware="H100")
    h100 = HardwareProfile.objects.get(name="H100")
    entries = operator_history(team=world.red, operator="rms_norm", hardware=h100)["entries"]
    assert [e["submission"] for e in entries] == [on_h100.pk]
    everything = operator_history(team=world.red, operator="rms_norm",
                                  release=world.release)["entries"]
    assert len(everything) == 4


def test_history_reads_a_fixed_number_of_queries(world: IterationWorld,
                                                 django_assert_max_num_queries: Any) -> None:
    for minutes in range(6):
        scored_kernels(world.red, world.release, {"rms_norm": (f"v{minutes}", 0.5)},
                       minutes_ago=minutes)
    with django_assert_max_num_queries(3):
        assert len(operator_history(team=world.red, operator="rms_norm")["entries"]) == 9


def test_history_api_answers_for_the_tokens_team_only(world: IterationWorld) -> None:
    red = token_client(world.red).get("/api/team/history/rms_norm/").json()
    assert red["team"] == "Red" and len(red["entries"]) == 3
    assert red["entries"][0]["release"] == {"id": world.release.pk, "name": "atrex-fixture",
                                            "version": 1}
    blue = token_client(world.blue).get("/api/team/history/rms_norm/").json()
    assert [e["submission"] for e in blue["entries"]] == [world.theirs.pk]


def test_history_api_refuses_what_it_cannot_answer(world: IterationWorld) -> None:
    client = token_client(world.red)
    assert Client().get("/api/team/history/rms_norm/").status_code == 401
    assert client.get("/api/team/history/layer_norm/").status_code == 404
    assert client.get("/api/team/history/rms%00norm/").status_code == 404
    assert client.get("/api/team/history/rms_norm/?release=-1").status_code == 400
    assert client.get("/api/team/history/rms_norm/?hardware=B999").status_code == 404
    assert signed_in(UserFactory(username="staffer", is_staff=True)).get(
        "/api/team/history/rms_norm/").status_code == 403  # a history is a team's own


def test_history_page_shows_each_submission_and_links_changed_sources_to_compare(
        world: IterationWorld) -> None:
    page = signed_in(world.ruby).get("/team/history/rms_norm/").content.decode()
    first, second = world.first.pk, world.second.pk
    assert f'href="/submissions/{first}/compare/{second}/"' in page
    assert f"unchanged since #{second}" in page
    assert "0.400" in page and "0.700" in page
    assert 'data-url="/api/team/history/rms_norm/"' in page
    assert f'href="/submissions/{world.theirs.pk}/"' not in page  # Blue's


def test_the_team_and_submission_pages_link_to_histories_and_comparisons(
        world: IterationWorld) -> None:
    client = signed_in(world.ruby)
    team_page = client.get("/team/").content.decode()
    assert 'href="/team/history/gemm_fp16/"' in team_page
    assert 'href="/team/history/rms_norm/"' in team_page
    second, third = world.second.pk, world.third.pk
    page = client.get(f"/submissions/{third}/").content.decode()
    assert 'href="/team/history/rms_norm/"' in page
    assert f'href="/submissions/{second}/compare/{third}/"' in page  # the older one is A
    assert f'/compare/{world.theirs.pk}/' not in page


# Compare


def test_compare_refuses_another_teams_submission_with_404(world: IterationWorld) -> None:
    ours, theirs = world.first.pk, world.theirs.pk
    ruby, api = signed_in(world.ruby), token_client(world.red)
    for a, b in ((ours, theirs), (theirs, ours)):
        assert ruby.get(f"/submissions/{a}/compare/{b}/").status_code == 404
        assert api.get(f"/api/submissions/{a}/compare/{b}/").status_code == 404
    assert api.get(f"/api/submissions/{ours}/compare/999999/").status_code == 404
    assert Client().get(f"/api/submissions/{ours}/compare/{ours}/").status_code == 401
    staff = signed_in(UserFactory(username="staffer", is_staff=True))
    assert staff.get(f"/api/submissions/{ours}/compare/{theirs}/").status_code == 200


def test_compare_json_has_per_shape_deltas(world: IterationWorld) -> None:
    red, release = world.red, world.release
    a = scored_kernels(red, release, {"rms_norm": ("x", 0.4)}, seconds=10e-6, minutes_ago=2)
    b = scored_kernels(red, release, {"rms_norm": ("y", 0.5), "gemm_fp16": ("z", 0.2)}, seconds=8e-6)
    doc = token_client(red).get(f"/api/submissions/{a.pk}/compare/{b.pk}/").json()
    assert (doc["a"]["submission"], doc["b"]["submission"]) == (a.pk, b.pk)
    assert doc["same_target"]
    gemm, rms = doc["operators"]
    assert rms["operator"] == "rms_norm" and rms["s_op_delta"] == pytest.approx(0.1)
    assert len(rms["shapes"]) == SHAPES
    for shape in rms["shapes"]:
        assert shape["a"]["attainment"] == 0.4 and shape["b"]["attainment"] == 0.5
        assert shape["attainment_delta"] == pytest.approx(0.1)
        assert shape["speedup"] == pytest.approx(1.25)
        assert shape["median_s_delta"] == pytest.approx(-2e-6)
        assert not shape["verdict_changed"]
    assert gemm["a"] is None and gemm["b"]["s_op"] == pytest.approx(0.2)
    assert all(s["a"] is None and s["attainment_delta"] is None for s in gemm["shapes"])
    assert doc["b"]["by_operator"] == pytest.approx({"rms_norm": 0.5, "gemm_fp16": 0.2})


def test_compare_marks_a_changed_verdict(world: IterationWorld) -> None:
    red, release = world.red, world.release
    a = scored_kernels(red, release, {"rms_norm": ("x", 0.4)}, minutes_ago=2)
    b = scored_kernels(red, release, {"rms_norm": ("y", 0.4)}, verdict="fallback-vendor")
    shapes = submission_compare(a, b)["operators"][0]["shapes"]
    assert all(s["verdict_changed"] for s in shapes)
    assert shapes[0]["b"]["verdict"] == "fallback-vendor"


def test_the_diff_shows_changed_lines(world: IterationWorld) -> None:
    first, second = world.first, world.second
    rms = next(op for op in submission_compare(first, second)["operators"]
               if op["operator"] == "rms_norm")
    assert rms["source_changed"]
    lines = rms["diff"].splitlines()
    assert f"--- #{first.pk}/rms_norm.py" in lines and f"+++ #{second.pk}/rms_norm.py" in lines
    assert "-        return x * 2" in lines and "+        return x * 3" in lines
    assert "     def forward(self, x):" in lines  # context around the change
    same = submission_compare(second, world.third)["operators"]
    assert [(op["operator"], op["source_changed"], op["diff"]) for op in same
            if op["operator"] == "rms_norm"] == [("rms_norm", False, "")]


def test_the_compare_page_shows_the_diff_escaped(world: IterationWorld) -> None:
    red, release = world.red, world.release
    a = scored_kernels(red, release, {"rms_norm": ("x = 1\n", 0.4)}, minutes_ago=2)
    b = scored_kernels(red, release, {"rms_norm": ("x = '<script>alert(1)</script>'\n", 0.5)})
    page = signed_in(world.ruby).get(f"/submissions/{a.pk}/compare/{b.pk}/").content.decode()
    assert '<span class="del">-x = 1</span>' in page
    assert ('<span class="add">+x = &#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27;</span>'
            in page)
    assert "<script>alert" not in page
    assert "+0.100" in page  # the S_op delta


def test_a_diff_of_huge_sources_is_left_out() -> None:
    huge = "x\n" * (MAX_DIFF_LINES + 1)
    assert unified_diff(huge, "y\n", "a", "b").startswith("(not shown")
    assert diff_lines("--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n z") == [
        ("file", "--- a"), ("file", "+++ b"), ("hunk", "@@ -1 +1 @@"), ("del", "-x"),
        ("add", "+y"), ("context", " z")]


def test_a_job_that_ended_with_no_shape_correct_reads_failed_not_scored(
        world: IterationWorld) -> None:
    """History, compare and their API (which `atrex history` prints) say what the team's
    list says: "scored" only when some shape passed."""
    failed = scored_kernels(world.red, world.release, {"rms_norm": ("z", 0.0)}, status="failed")
    last = operator_history(team=world.red, operator="rms_norm")["entries"][-1]
    assert last["submission"] == failed.pk and last["status"] == "failed"
    compared = submission_compare(world.third, failed)
    assert compared["b"]["status"] == "failed" and compared["a"]["status"] == "scored"
    [rms] = [op for op in compared["operators"] if op["operator"] == "rms_norm"]
    assert (rms["a"]["status"], rms["b"]["status"]) == ("scored", "failed")
    page = signed_in(world.ruby).get("/team/history/rms_norm/").content.decode()
    assert '<span class="badge failed">failed</span>' in page
