"""Shared fixtures: the project's fixture release and its sample candidates."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURE_RELEASE = REPO / "evaluation" / "releases" / "atrex-fixture"
SAMPLE_CANDIDATES = REPO / "evaluation" / "sample_candidates"


@pytest.fixture(scope="session")
def fixture_release_path() -> Path:
    return FIXTURE_RELEASE


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> None:
    """Each test starts with empty rate-limit histories (they live in the cache)."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def rate_limits(settings: Any) -> Callable[..., None]:
    """Sets requests a minute by throttle scope (`rate_limits(login=3)`) for one test; the
    scopes not named keep their settings."""

    def set_limits(**per_minute: int) -> None:
        rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],
                 **{scope: f"{n}/min" for scope, n in per_minute.items()}}
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}

    return set_limits
