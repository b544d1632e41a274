"""The tiers a board ranks in (leaderboard/tiers.py): a release's widest ranked tier decides
which verdicts earn, a board filtered to a tier shows the submissions within it."""

from __future__ import annotations

import pytest
from django.test import Client

from evaluation.catalog.models import Release
from leaderboard import tiers
from leaderboard.scoring import ScoringPolicy, ShapeOutcome, shape_score
from leaderboard.services import (
    release_set_ranked_tier,
    rescore_submission,
    weight_set_activate,
    weight_set_create,
)
from portal.audit.models import AuditEntry
from tests.builders import scored_submission
from tests.world import World


def library_outcome(verdict: str) -> ShapeOutcome:
    return ShapeOutcome(operator="rms_norm", shape_id="s", correct=True, verdict=verdict,
                        attainment=0.5)


@pytest.mark.parametrize(("tier", "earning"), [
    (tiers.EXPLICIT_DSL, {"native"}),
    (tiers.SELF_AUTHORED, {"native", "mixed"}),
    (tiers.LIBRARIES, {"native", "mixed", "library"}),
])
def test_each_tier_lets_its_verdicts_earn_and_no_fallback(tier: str, earning: set[str]) -> None:
    policy = ScoringPolicy(earning=tiers.earning_verdicts(tier))
    for verdict in ("native", "mixed", "library", "fallback-torch", "fallback-vendor"):
        expected = 0.5 if verdict in earning else 0.0
        assert shape_score(library_outcome(verdict), policy) == expected, (tier, verdict)


def test_a_submissions_tier_is_the_narrowest_holding_what_earned() -> None:
    assert tiers.submission_tier(native=3, mixed=0, library=0) == tiers.EXPLICIT_DSL
    assert tiers.submission_tier(native=3, mixed=1, library=0) == tiers.SELF_AUTHORED
    assert tiers.submission_tier(native=0, mixed=1, library=2) == tiers.LIBRARIES
    assert tiers.submission_tier(native=0, mixed=0, library=0) is None


def board(release: Release, query: str = "") -> list[tuple[str, float, str | None]]:
    response = Client().get(f"/api/boards/{release.pk}/H200/{query}")
    assert response.status_code == 200, response.content
    return [(r["team"], round(r["aggregate"], 3), r["tier"]) for r in response.json()["rows"]]


def test_the_tier_filter_changes_a_board(world: World) -> None:
    release = world.release
    weight_set_activate(weight_set=weight_set_create(release=release, weights={"rms_norm": 1},
                                                     source="manual"), actor=None)
    for team, value, verdict in ((world.red, 0.4, "native"), (world.blue, 0.6, "library")):
        rescore_submission(scored_submission(release, team, {"rms_norm": value},
                                             verdict=verdict))
    # by default only native work earns: Blue's library kernels score 0, Red leads
    assert board(release)[0][0] == world.red.name
    # a tier wider than the release ranks is not offered
    assert Client().get(f"/api/boards/{release.pk}/H200/?tier=libraries").status_code == 404

    release_set_ranked_tier(release=release, tier=tiers.LIBRARIES, actor=world.root)
    red, blue = world.red.name, world.blue.name
    everyone = board(release)
    assert [row[0] for row in everyone] == [blue, red]  # library work earns now
    assert everyone[0][2] == tiers.LIBRARIES and everyone[1][2] == tiers.EXPLICIT_DSL
    assert [row[0] for row in board(release, "?tier=explicit-dsl")] == [red]
    assert [row[0] for row in board(release, "?tier=libraries")] == [blue, red]
    page = Client().get(f"/boards/{release.pk}/H200/?tier=explicit-dsl").content.decode()
    assert 'id="tier-filter"' in page and "Libraries allowed (Fast)" in page
    assert "This release ranks up to <strong>Libraries allowed</strong>" in page
    entry = AuditEntry.objects.get(action="release.ranked_tier")
    assert entry.before == {"ranked_tier": "explicit-dsl"}
    assert entry.after == {"ranked_tier": "libraries"}


def test_an_admin_sets_the_ranked_tier_on_the_weights_page(world: World) -> None:
    admin = Client()
    admin.force_login(world.root)
    url = f"/staff/releases/{world.release.pk}/weights/"
    assert 'id="ranked-tier"' in admin.get(url).content.decode()
    assert admin.post(url, {"ranked_tier": "self-authored"}).status_code == 302
    world.release.refresh_from_db()
    assert world.release.ranked_tier == tiers.SELF_AUTHORED
    assert admin.post(url, {"ranked_tier": "anything"}).status_code == 400
