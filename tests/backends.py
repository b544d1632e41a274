"""Which tests the second CI leg runs again: those whose outcome the backends can change.

`.ci/run` runs the whole suite on PostgreSQL + Redis (the production stack), then the
embedded default (SQLite + the filesystem broker, what `make run` starts) again for the
tests marked `on_both_backends` here: every test that reaches the database (pytest-django's
`django_db` mark, or a fixture that needs the test database such as `live_server`) or starts
a Celery worker on the configured broker (`tests/worker.py`). The rest (the harness, the
sandbox, the adversarial CPU cases, local evaluation, the broker transport's own tests with
their own URL) never read `DATABASE_URL` or `CELERY_BROKER_URL`, so a second run could only
repeat the first. Loaded with `-p tests.backends` (pyproject's addopts).
"""

from __future__ import annotations

import pytest

ON_BOTH_BACKENDS = "on_both_backends"

# Fixtures that reach the test database; a test asking for one of them (or for a fixture
# that does) has it in its fixture closure.
_DATABASE_FIXTURES = frozenset({"db", "transactional_db", "live_server", "django_db_setup"})
# Names a module holds when it starts Celery workers on the configured broker.
_WORKER_HELPERS = frozenset({"celery_worker", "pipeline_workers"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{ON_BOTH_BACKENDS}: reaches the database or the broker, so the CI runs "
        "it on PostgreSQL + Redis and on SQLite + the filesystem broker (set by tests/backends.py)")


def reaches_a_backend(item: pytest.Item) -> bool:
    if item.get_closest_marker("django_db") is not None:
        return True
    if _DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    module = getattr(item, "module", None)
    return module is not None and bool(_WORKER_HELPERS & set(vars(module)))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if reaches_a_backend(item):
            item.add_marker(ON_BOTH_BACKENDS)
