"""Derived data kept in Django's cache under generation tokens.

Readers key what they compute on the current generations of the kinds it depends on
(`remember`); every write that changes such data moves the generation of the narrowest kind
it touches on (`changed`, after the write commits), so a reader never gets an entry computed
before the write. `BOARDS` is every board; `board(release, hardware)` one release's boards
on one hardware profile (a finished job clears only those); `OVERVIEW` the pages that count
rows across boards (the boards index, the front page's headlines).

A board is read most while it changes most: many visitors miss its entry at once after a
job finished. `remember` lets one of them recompute it (a short lock in the cache, one per
entry); the others get the entry's previous value (its "stale" copy) while there is one, or
wait for the new one a moment. Entries also expire after `timeout` seconds: the bound on
staleness where the cache is not shared between processes (the embedded default's
local-memory cache, whose worker process cannot reach the web process's entries).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import TypeVar

from django.core.cache import cache
from django.db import transaction

T = TypeVar("T")
BOARDS = "boards"  # leaderboard rows: scores, hidden teams, freezes, weight activations
OVERVIEW = "boards-overview"  # what counts rows across boards: the index, the headlines
LOCK_S = 30  # the longest one recomputation holds its entry's lock (then another may try)
WAIT_S = 5.0  # the longest a reader without a stale copy waits for another's recomputation
STALE_S = 300  # how long an entry's previous value may be served during a recomputation
_POLL_S = 0.02


def board(release_id: int, hardware_id: int) -> str:
    """The kind of one release's boards on one hardware profile (every board kind, the
    exports and the operator boards)."""
    return f"board:{release_id}:{hardware_id}"


def _generation_key(kind: str) -> str:
    return f"generation:{kind}"


def changed(kind: str) -> None:
    """Drop every cached entry of `kind`: now, and again once the current transaction commits
    (an entry computed in between, from the data before the write, is dropped then)."""
    _next_generation(kind)
    transaction.on_commit(lambda: _next_generation(kind))


def _next_generation(kind: str) -> None:
    cache.set(_generation_key(kind), uuid.uuid4().hex, None)


def _generation(kind: str) -> str:
    generation = cache.get(_generation_key(kind))
    if generation is None:
        cache.add(_generation_key(kind), uuid.uuid4().hex, None)
        generation = cache.get(_generation_key(kind))
    return str(generation)


def remember(kind: str | Sequence[str], key: str, compute: Callable[[], T], timeout: int) -> T:
    """The entry `key` of `kind` (or of several kinds: it is dropped when any changes),
    computed once per generation; one recomputation at a time per entry."""
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    generations = ":".join(_generation(k) for k in kinds)
    entry = f"{'+'.join(kinds)}:{generations}:{key}"
    stale = f"{'+'.join(kinds)}:stale:{key}"
    found: T | None = cache.get(entry)
    if found is not None:
        return found
    lock = f"{entry}:lock"
    deadline = time.monotonic() + WAIT_S
    while not cache.add(lock, 1, LOCK_S):
        # another reader recomputes this entry: its previous value meanwhile, if any
        previous: T | None = cache.get(stale)
        if previous is not None:
            return previous
        time.sleep(_POLL_S)
        found = cache.get(entry)
        if found is not None:
            return found
        if time.monotonic() > deadline:
            return compute()  # it is taking too long: compute it ourselves, unstored
    try:
        found = cache.get(entry)  # stored while we took the lock
        if found is None:
            found = compute()
            cache.set(entry, found, timeout)
            cache.set(stale, found, max(timeout, STALE_S))
        return found
    finally:
        cache.delete(lock)
