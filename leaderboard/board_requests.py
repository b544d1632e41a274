"""What a board's page and its export read from one request: the release, the hardware, the
weight version, the board, the rows. 404 for anything named that does not exist, for pages
and the API alike (DRF answers Django's Http404 as its JSON 404)."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.shortcuts import get_object_or_404

from evaluation.catalog.models import HardwareProfile, Release
from evaluation.harness.dsl import DSL_LABELS, KNOWN_DSLS
from leaderboard import tiers
from leaderboard.baselines import baseline_rows
from leaderboard.models import WeightSet
from leaderboard.selectors import (
    BOARDS,
    NUMBER_COLUMNS,
    SUBSET_BOARDS,
    analysis_points,
    board_freeze,
    board_has_shapes,
    board_rows,
    dsl_rates,
    operator_board,
    rank_changes,
    recorded_on_boards,
    recorded_sources,
    weight_set_for,
)
from portal import derived_cache
from portal.lookup import or_404

# Boards are cached (portal/derived_cache.py): every write that changes one drops them at
# once; where the cache is per process (embedded default) a board lags a worker's rescore by
# at most this long.
BOARD_CACHE_S = 10


def board_kinds(release: Release, hardware: HardwareProfile) -> tuple[str, str]:
    """What a board's cached entries depend on: every board, and this release's on this
    hardware (a finished job drops only those: portal/derived_cache.py)."""
    return derived_cache.BOARDS, derived_cache.board(release.pk, hardware.pk)


def release_and_hardware(pk: int, hardware: str) -> tuple[Release, HardwareProfile]:
    return get_object_or_404(Release, pk=pk), get_object_or_404(HardwareProfile, name=hardware)


def weights_asked(release: Release, version: str | None) -> WeightSet:
    """The weight set `?weights=N` names, else the active one."""
    return or_404(weight_set_for(release, version), "no such weight set")


def board_data(query: Any, pk: int, hardware: str, board: str = "aggregate") -> dict[str, Any]:
    """A board as its page and its exports show it; `query` holds the request's GET
    parameters (weights, board, all, sort)."""
    release, profile = release_and_hardware(pk, hardware)
    weight_set = weights_asked(release, query.get("weights"))
    board = query.get("board", board)
    if board not in BOARDS:
        raise Http404("no such board")
    all_submissions = query.get("all") == "1"
    sort = query.get("sort", board)
    sort = sort if sort in NUMBER_COLUMNS else board  # any other value sorts by the board
    dsl = query.get("dsl") or None
    if dsl is not None and dsl not in KNOWN_DSLS:
        raise Http404(f"no DSL named {dsl!r} (known: {', '.join(KNOWN_DSLS)})")
    offered = tiers.offered(release.ranked_tier)
    tier = query.get("tier") or None
    if tier is not None and tier not in offered:
        raise Http404(f"no tier {tier!r} ranks on this release (offered: {', '.join(offered)})")

    def compute() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]],
                           list[str]]:
        rows = board_rows(release=release, hardware=profile, weight_set=weight_set,
                          all_submissions=all_submissions, sort=sort, board=board, dsl=dsl,
                          tier=tier)
        baselines = baseline_rows(release=release, hardware=profile, weight_set=weight_set,
                                  board=board)
        shown = [int(r["submission"]) for r in [*rows, *baselines] if r.get("submission")]
        # the rows' sources are among the board's kept ones: none kept, none to read
        recorded = (recorded_sources(shown)
                    if recorded_on_boards(release=release, hardware=profile) else [])
        return (rows, baselines, dsl_rates(release=release, hardware=profile), recorded)

    key = (f"{release.pk}:{profile.pk}:{weight_set.pk}:{board}:{int(all_submissions)}:{sort}:"
           f"{dsl or ''}:{tier or ''}")
    # v3: rows badged "no interval", the generalisation flag's reasons (2026-12-04)
    rows, baselines, rates, recorded = derived_cache.remember(
        board_kinds(release, profile), f"board-v3:{key}", compute, BOARD_CACHE_S)
    return {"release": release, "hardware": profile, "weight_set": weight_set, "board": board,
            "rows": rows, "freeze": board_freeze(release, profile), "baselines": baselines,
            "cache_key": key, "dsl": dsl, "dsl_rates": rates,
            # regime and phase columns no shape of the release falls in: "–", not "not timed"
            "empty_columns": [b for b in SUBSET_BOARDS if not board_has_shapes(release, profile, b)],
            # where recorded results among the rows came from (leaderboard/demo.py)
            "recorded": recorded,
            # the filter offers what the release accepts and what its files declared
            "dsls": [(name, DSL_LABELS[name]) for name in KNOWN_DSLS
                     if name in release.accepted_dsls() or name in {r["dsl"] for r in rates}],
            # the tiers this release ranks (leaderboard/tiers.py): the filter and the legend
            "tier": tier, "tiers": [tiers.TIERS[name] for name in offered],
            "ranked_tier": tiers.TIERS[release.ranked_tier]}


def operator_board_data(query: Any, pk: int, hardware: str, operator: str) -> dict[str, Any]:
    release, profile = release_and_hardware(pk, hardware)
    get_object_or_404(release.operators, name=operator)
    weight_set = weights_asked(release, query.get("weights"))
    board = derived_cache.remember(
        board_kinds(release, profile), f"operator:{release.pk}:{profile.pk}:{weight_set.pk}:{operator}",
        lambda: operator_board(release=release, hardware=profile, weight_set=weight_set,
                               operator=operator), BOARD_CACHE_S)
    return {"release": release, "hardware": profile, "weight_set": weight_set, **board}


def analysis_data(query: Any, pk: int, hardware: str) -> dict[str, Any]:
    """Output tokens an agent spent against the S_agg it reached, one point per submission."""
    release, profile = release_and_hardware(pk, hardware)
    weight_set = weights_asked(release, query.get("weights"))
    return {"release": release, "hardware": profile, "weight_set": weight_set,
            "points": analysis_points(release=release, hardware=profile, weight_set=weight_set),
            "dsl_rates": dsl_rates(release=release, hardware=profile)}


def rank_changes_data(query: Any, pk: int, hardware: str) -> dict[str, Any]:
    """What changed between two weight versions (?from=A&to=B; default: previous -> active)."""
    release, profile = release_and_hardware(pk, hardware)
    after = weights_asked(release, query.get("to"))
    previous = release.weight_sets.filter(version__lt=after.version).order_by("-version").first()
    before = weights_asked(release, query.get("from")
                           or str(getattr(previous, "version", after.version)))
    return {"release": release, "hardware": profile, "before": before, "after": after,
            "rows": rank_changes(release=release, hardware=profile, before=before, after=after)}
