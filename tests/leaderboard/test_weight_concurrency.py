"""Weight sets under concurrency: parallel activations and creations, each thread with its
own database connection (meaningful on PostgreSQL; SQLite serialises writers anyway)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection

from leaderboard.models import WeightSet
from leaderboard.services import weight_set_activate, weight_set_create
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = 6


def in_parallel(work: Callable[[int], object]) -> list[BaseException]:
    """Run work(0..THREADS-1) at once, one thread (and connection) each; return the errors."""
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def one(index: int) -> None:
        try:
            barrier.wait()
            work(index)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted on below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def test_parallel_activations_leave_exactly_one_active_set() -> None:
    release = import_fixture_release()
    sets = [weight_set_create(release=release, weights={"rms_norm": i + 1}, source="manual")
            for i in range(THREADS)]
    for _ in range(3):
        # No set active: the first activation has no active row to lock.
        WeightSet.objects.filter(release=release).update(active=False)
        errors = in_parallel(lambda i: weight_set_activate(weight_set=sets[i], actor=None))
        assert errors == []
        assert WeightSet.objects.filter(release=release, active=True).count() == 1


def test_parallel_creations_get_distinct_versions() -> None:
    release = import_fixture_release()
    WeightSet.objects.filter(release=release).delete()
    errors = in_parallel(lambda i: weight_set_create(release=release, weights={"rms_norm": 1},
                                                     source="manual"))
    assert errors == []
    assert sorted(WeightSet.objects.filter(release=release).values_list("version", flat=True)) \
        == list(range(1, THREADS + 1))
