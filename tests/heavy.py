"""Which tests are heavy: they start a Celery worker, the sandboxed child, a live server or
a browser, and take most of the suite's time. `make quick`, the inner loop (DEVELOPERS.md),
runs the others (`-m "not heavy"`); CI runs them all. Loaded with `-p tests.heavy`
(pyproject's addopts).
"""

from __future__ import annotations

import pytest

HEAVY = "heavy"

# Fixtures that start a live server (and a browser on it).
_SERVER_FIXTURES = frozenset({"live_server", "page"})
# Names a module holds when its tests start Celery workers or the sandboxed child.
_PROCESS_HELPERS = frozenset({
    "celery_worker", "pipeline_workers",  # tests/worker.py
    "evaluate", "run_candidate", "run_job_spec", "evaluate_locally", "profile_shape",
    "WarmChildren", "ChildProcess", "run_case",  # the harness, the worker, the sandbox
})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{HEAVY}: starts a Celery worker, the sandboxed child, a live server or a "
        "browser (set by tests/heavy.py); `make quick` leaves these out")


def is_heavy(item: pytest.Item) -> bool:
    if _SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    module = getattr(item, "module", None)
    return module is not None and bool(_PROCESS_HELPERS & set(vars(module)))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_heavy(item):
            item.add_marker(HEAVY)
