"""Boards are cached (portal/derived_cache.py), and every write that changes one shows at once."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evaluation.catalog.models import HardwareProfile
from leaderboard.services import (
    board_freeze_set,
    rescore_submission,
    weight_set_activate,
    weight_set_create,
)
from portal.accounts.models import Team
from submissions.models import ShapeResult, Submission
from tests.builders import scored_submission
from tests.world import World, build_world, extended, signed_in

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class CachedWorld(World):
    red_submission: Submission  # Red leads Blue under the active weights (rms_norm alone)


@pytest.fixture
def world() -> CachedWorld:
    world = build_world()
    release = world.release
    red = scored_submission(release, world.red, {"rms_norm": 0.8, "gemm_fp16": 0.2})
    scored_submission(release, world.blue, {"rms_norm": 0.2, "gemm_fp16": 0.6})
    weight_set_activate(weight_set=weight_set_create(release=release, weights={"rms_norm": 1},
                                                     source="manual"), actor=None)
    return extended(world, CachedWorld, red_submission=red)


def board(release: Any) -> list[str]:
    return [r["team"] for r in Client().get(f"/api/boards/{release.pk}/H200/").json()["rows"]]


def queries(url: str) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as captured:
        body = Client().get(url).content.decode()
    # Pages differ only by the CSRF token each response masks anew.
    return len(captured.captured_queries), re.sub(r'"X-CSRFToken": "[^"]+"', "", body)


@pytest.mark.parametrize("path", ["/boards/{pk}/H200/", "/api/boards/{pk}/H200/",
                                  "/boards/{pk}/H200/operators/rms_norm/"])
def test_a_board_read_again_comes_from_the_cache(world: CachedWorld, path: str) -> None:
    url = path.format(pk=world.release.pk)
    first, body = queries(url)
    again, same = queries(url)
    assert again < first and same == body


def test_the_htmx_table_is_the_pages_table(world: CachedWorld) -> None:
    url = f"/boards/{world.release.pk}/H200/"
    page = Client().get(url).content.decode()
    table = Client().get(url, headers={"HX-Request": "true"}).content.decode()
    assert table.strip().startswith('<div id="board-holder">') and table in page
    assert "&lt;" not in table  # the cached HTML is not escaped a second time


def test_activating_weights_shows_at_once(world: CachedWorld) -> None:
    release = world.release
    assert board(release) == ["Red", "Blue"]
    gemm = weight_set_create(release=release, weights={"gemm_fp16": 1}, source="manual")
    weight_set_activate(weight_set=gemm, actor=None)
    assert board(release) == ["Blue", "Red"]


def test_a_new_result_shows_at_once(world: CachedWorld) -> None:
    release = world.release
    assert board(release) == ["Red", "Blue"]
    ShapeResult.objects.filter(job__candidate__submission=world.red_submission).update(attainment=0.01)
    rescore_submission(world.red_submission)  # what the results consumer does when a job finishes
    assert board(release) == ["Blue", "Red"]


def test_hiding_a_team_shows_at_once(world: CachedWorld) -> None:
    release = world.release
    assert board(release) == ["Red", "Blue"]
    admin = signed_in(world.root)
    red = Team.objects.get(name="Red")
    response = admin.post("/admin/accounts/team/", {"action": "hide_teams",
                                                    "_selected_action": [red.pk]})
    assert response.status_code == 302
    assert board(release) == ["Blue"]


def test_freezing_shows_at_once(world: CachedWorld) -> None:
    release = world.release
    url = f"/boards/{release.pk}/H200/"
    assert 'id="frozen"' not in Client().get(url).content.decode()
    board_freeze_set(release=release, hardware=HardwareProfile.objects.get(name="H200"),
                     actor=None)
    assert 'id="frozen"' in Client().get(url).content.decode()
    scored_submission(release, "Late", {"rms_norm": 0.9, "gemm_fp16": 0.9})
    rescore_submission(release.submissions.get(team__name="Late"))
    assert "Late" not in board(release)
