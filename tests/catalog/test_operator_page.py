"""An operator's problem page reads as a page, not a dump: its facts, its shapes once with
their arguments as name=value, and links to its boards and to submitting for it."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.factories import TeamFactory, member_of
from tests.paths import REPO
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def test_the_operator_page_labels_every_shape_and_links_its_boards() -> None:
    release = import_fixture_release()
    page = Client().get(f"/releases/{release.pk}/rms_norm/").content.decode()

    facts = re.search(r'<dl class="facts" id="operator-facts">(.*?)</dl>', page, flags=re.S)
    assert facts is not None
    assert "<dt>Phase</dt><dd>prefill/decode</dd>" in facts.group(1)
    assert f'href="/boards/{release.pk}/H200/operators/rms_norm/"' in facts.group(1)

    shape_ids = list(release.operators.get(name="rms_norm").shapes.order_by("position")
                     .values_list("shape_id", flat=True))
    rows = re.findall(r'<tr data-shape="([^"]+)">(.*?)</tr>', page, flags=re.S)
    assert [shape_id for shape_id, _ in rows] == shape_ids  # each shape once, in order
    cells = dict(rows)
    assert ('<code class="argument">num_tokens=4</code> <code class="argument">hidden_size=256'
            '</code>') in cells["dev-t4-h256"]
    assert "dev tier: CPU checks, not scored" in cells["dev-t4-h256"]
    assert "dev tier" not in cells["llama8b-decode-t1-h4096"]
    assert re.search(r"<td>(memory|compute|balanced)</td>", cells["llama8b-decode-t1-h4096"])
    # no Python dict reprs, and shapes.json is not printed a second time
    assert "{&#x27;" not in page and "{'" not in page
    assert "<summary>shapes.json</summary>" not in page
    assert "<summary>reference.py</summary>" in page


def test_a_team_member_is_offered_to_submit_for_the_operator() -> None:
    release = import_fixture_release()
    team_client = Client()
    team_client.force_login(member_of(TeamFactory(), "alice"))  # type: ignore[arg-type]
    page = team_client.get(f"/releases/{release.pk}/rms_norm/").content.decode()
    link = f'/submit/?release={release.pk}&amp;operator=rms_norm'
    assert link in page
    upload = team_client.get(link.replace("&amp;", "&")).content.decode()
    assert re.search(r'<option value="rms_norm" selected>rms_norm</option>', upload)
    assert re.search(rf'<option value="{release.pk}" selected>', upload)


def test_a_visitor_is_offered_to_sign_in_and_submit_for_the_operator() -> None:
    release = import_fixture_release()
    page = Client().get(f"/releases/{release.pk}/rms_norm/").content.decode()
    link = re.search(r'<a class="button" id="submit-for-operator" href="([^"]+)">([^<]+)</a>',
                     page)
    assert link is not None and link.group(2) == "Sign in to submit a kernel for rms_norm"
    assert link.group(1) == (f"/accounts/login/?next=%2Fsubmit%2F%3Frelease%3D{release.pk}"
                             "%26operator%3Drms_norm")


def test_a_shapes_arguments_stay_whole_and_long_lists_are_shortened() -> None:
    from evaluation.catalog.templatetags.catalog_extras import argument_text, argument_title

    lengths = [512, 384, 1024, 96, 2048, 7, 9]
    assert argument_text(lengths) == "[512, 384, 1024, 96, …] (7 values)"
    assert argument_title(lengths) == "[512, 384, 1024, 96, 2048, 7, 9]"
    assert argument_text([1, 2, 3]) == "[1, 2, 3]" and argument_title([1, 2, 3]) == ""
    assert argument_text(4096) == "4096"
    release = import_fixture_release()
    page = Client().get(f"/releases/{release.pk}/rms_norm/").content.decode()
    assert re.search(r'<code class="argument">hidden_size=\d+</code>', page)
    css = (REPO / "static" / "site.css").read_text()
    assert "#operator-shapes td code.argument { white-space: nowrap;" in css
