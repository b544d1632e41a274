"""OPTIONS on a board export asking for CSV answers its description, as JSON: never a 500 (the
CSV renderer renders nothing; the views write their CSV themselves)."""

from __future__ import annotations

import pytest
from django.test import Client

from leaderboard.services import weight_set_from_release
from tests.world import World

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["", "compute/", "operators/rms_norm/"])
def test_options_on_a_csv_export_answers_json_not_500(world: World, path: str) -> None:
    weight_set_from_release(world.release)
    url = f"/api/boards/{world.release.pk}/H200/{path}?format=csv"
    reply = Client().options(url)
    assert reply.status_code == 200 and reply["Content-Type"] == "application/json"
    assert "text/csv" in reply.json()["renders"]
    assert Client().get(url)["Content-Type"].startswith("text/csv")  # GET still CSV
    assert Client().post(url).status_code == 405
