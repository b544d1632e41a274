"""The world of the board tests: Red and Blue scored on rms_norm and gemm_fp16, two weight
sets that order them differently, and the board as the public API gives it."""

from __future__ import annotations

from dataclasses import dataclass

from django.test import Client

from evaluation.catalog.models import Release
from leaderboard.models import WeightSet
from leaderboard.services import weight_set_create
from tests.builders import scored_submission
from tests.world import World, build_world, extended


@dataclass(frozen=True)
class WeighedWorld(World):
    norm_only: WeightSet  # rms_norm alone counts: Red 0.8 leads Blue 0.2
    gemm_only: WeightSet  # gemm_fp16 alone counts: Blue 0.6 leads Red 0.2; created second


def build_weighed_world() -> WeighedWorld:
    """Both weight sets inactive: neither team is scored yet."""
    world = build_world()
    release = world.release
    scored_submission(release, world.red, {"rms_norm": 0.8, "gemm_fp16": 0.2})
    scored_submission(release, world.blue, {"rms_norm": 0.2, "gemm_fp16": 0.6})
    norm_only = weight_set_create(release=release, weights={"rms_norm": 1}, source="manual")
    gemm_only = weight_set_create(release=release, weights={"gemm_fp16": 3}, source="manual")
    return extended(world, WeighedWorld, norm_only=norm_only, gemm_only=gemm_only)


def board(release: Release, version: int | None = None) -> list[tuple[str, float]]:
    """The H200 board's (team, aggregate) rows, with weights `version` or the active ones."""
    query = f"?weights={version}" if version else ""
    rows = Client().get(f"/api/boards/{release.pk}/H200/{query}").json()["rows"]
    return [(r["team"], round(r["aggregate"], 6)) for r in rows]
