"""Derived data kept in Django's cache under a generation token.

Readers key what they compute on the current generation of its kind (`remember`); every write
that changes such data moves the generation on (`changed`, after the write commits), so a
reader never gets an entry computed before the write. Entries also expire after `timeout`
seconds: the bound on staleness where the cache is not shared between processes (the embedded
default's local-memory cache, whose worker process cannot reach the web process's entries).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import cache
from django.db import transaction

T = TypeVar("T")
BOARDS = "boards"  # leaderboard rows: scores, hidden teams, freezes, weight activations


def _generation_key(kind: str) -> str:
    return f"generation:{kind}"


def changed(kind: str) -> None:
    """Drop every cached entry of `kind`: now, and again once the current transaction commits
    (an entry computed in between, from the data before the write, is dropped then)."""
    _next_generation(kind)
    transaction.on_commit(lambda: _next_generation(kind))


def _next_generation(kind: str) -> None:
    cache.set(_generation_key(kind), uuid.uuid4().hex, None)


def remember(kind: str, key: str, compute: Callable[[], T], timeout: int) -> T:
    generation = cache.get(_generation_key(kind))
    if generation is None:
        cache.add(_generation_key(kind), uuid.uuid4().hex, None)
        generation = cache.get(_generation_key(kind))
    entry = f"{kind}:{generation}:{key}"
    found: T | None = cache.get(entry)
    if found is None:
        found = compute()
        cache.set(entry, found, timeout)
    return found
