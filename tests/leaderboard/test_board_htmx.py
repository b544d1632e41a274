"""A board's htmx requests: sorting and paging get the table alone, boosted links the page."""

from __future__ import annotations

import pytest
from django.test import Client

from leaderboard.services import weight_set_from_release
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def test_a_sort_request_gets_the_table_and_a_boosted_link_the_whole_page() -> None:
    release = import_fixture_release()
    weight_set_from_release(release)
    url = f"/boards/{release.pk}/H200/?sort=unweighted_mean"

    table = Client().get(url, HTTP_HX_REQUEST="true")
    assert table.content.decode().lstrip().startswith('<div id="board-holder">')
    assert "<h1>" not in table.content.decode()

    boosted = Client().get(url, HTTP_HX_REQUEST="true", HTTP_HX_BOOSTED="true")
    page = boosted.content.decode()
    assert "<h1>" in page and 'id="board-holder"' in page and 'id="board-filters"' in page
    assert "HX-Request" in table["Vary"] and "HX-Request" in boosted["Vary"]
