"""The second CI leg's selection (tests/backends.py): what reaches a backend is marked."""

from __future__ import annotations

import types

import pytest

from tests.backends import ON_BOTH_BACKENDS, reaches_a_backend


def test_a_test_without_database_or_broker_runs_once(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker(ON_BOTH_BACKENDS) is None


@pytest.mark.django_db
def test_a_test_marked_for_the_database_runs_on_both(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker(ON_BOTH_BACKENDS) is not None


def test_a_test_asking_for_the_live_server_runs_on_both(
        request: pytest.FixtureRequest, live_server: object) -> None:
    assert request.node.get_closest_marker(ON_BOTH_BACKENDS) is not None


def test_a_module_starting_celery_workers_runs_on_both() -> None:
    module = types.ModuleType("a_worker_test_module")
    module.celery_worker = object()  # type: ignore[attr-defined]
    item = types.SimpleNamespace(module=module, fixturenames=["tmp_path"],
                                 get_closest_marker=lambda name: None)
    assert reaches_a_backend(item)  # type: ignore[arg-type]
    item.module = types.ModuleType("a_harness_test_module")
    assert not reaches_a_backend(item)  # type: ignore[arg-type]
