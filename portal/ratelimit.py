"""Rate limits on the endpoints worth attacking: sign-in, API tokens, uploads.

Windows counted in Django's cache: the embedded default's local-memory cache (one
process), or a shared cache (`CACHE_URL=redis://…`) when several web processes serve the
portal. A request over the limit gets 429 with Retry-After, before any work is done.

Each caller's window starts at its first counted request, not at a clock boundary: a window
cut at whole minutes let a burst that straddled the boundary through at twice the limit
(and made the limit's own test fail when its four requests crossed a minute).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse


@dataclass(frozen=True)
class Limit:
    scope: str
    requests: int
    window_s: int


def limit(scope: str) -> Limit:
    requests, window_s = settings.ATREX_RATE_LIMITS[scope]
    return Limit(scope, int(requests), int(window_s))


# The clock, apart so tests can move it without moving the cache's own expiry clock.
clock: Callable[[], float] = time.time


def exceeded(rule: Limit, who: str) -> int | None:
    """Count one request of `who`; seconds until its window ends when over the limit."""
    key = f"ratelimit:{rule.scope}:{who}"
    ends_key = f"{key}:ends"
    now = clock()
    if cache.add(key, 1, timeout=rule.window_s):
        cache.set(ends_key, now + rule.window_s, timeout=rule.window_s)
        count = 1
    else:
        try:
            count = cache.incr(key)  # keeps the key's expiry: the window does not slide
        except ValueError:  # the window expired between add and incr: this starts the next
            cache.add(key, 1, timeout=rule.window_s)
            cache.set(ends_key, now + rule.window_s, timeout=rule.window_s)
            count = 1
    if count > rule.requests:
        ends = cache.get(ends_key, now + rule.window_s)
        return max(1, math.ceil(ends - now))
    return None


def client_address(request: Any) -> str:
    return str(request.META.get("REMOTE_ADDR", "unknown"))


def too_many(retry_after: int, what: str) -> HttpResponse:
    response = HttpResponse(f"Too many {what}; try again in {retry_after} s.\n", status=429,
                            content_type="text/plain")
    response["Retry-After"] = str(retry_after)
    return response


def limited_posts(scope: str, what: str,
                  who: Callable[[HttpRequest], str] = client_address) -> Callable[..., Any]:
    """Decorator for views: POSTs beyond the scope's limit answer 429."""
    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method == "POST":
                wait = exceeded(limit(scope), who(request))
                if wait is not None:
                    return too_many(wait, what)
            return view(request, *args, **kwargs)
        return wrapped
    return decorate
