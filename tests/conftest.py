"""Shared fixtures: the project's fixture release and its sample candidates, the world most
tests stand in (tests/world.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.paths import FIXTURE_RELEASE

if TYPE_CHECKING:
    from evaluation.catalog.models import Release
    from tests.world import World


@pytest.fixture(scope="session")
def fixture_release_path() -> Path:
    return FIXTURE_RELEASE


@pytest.fixture
def release(db: None) -> Release:
    """The fixture release, imported."""
    from tests.world import import_fixture_release

    return import_fixture_release()


@pytest.fixture
def world(db: None) -> World:
    """The fixture release and the small named cast (tests/world.py)."""
    from tests.world import build_world

    return build_world()


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
