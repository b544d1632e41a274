"""Shared fixtures: the project's fixture release and its sample candidates."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURE_RELEASE = REPO / "evaluation" / "releases" / "atrex-fixture"
SAMPLE_CANDIDATES = REPO / "evaluation" / "sample_candidates"


@pytest.fixture(scope="session")
def fixture_release_path() -> Path:
    return FIXTURE_RELEASE


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> None:
    """Each test starts with empty rate-limit windows (they live in the cache)."""
    from django.core.cache import cache

    cache.clear()
