"""Rate limits on the endpoints worth attacking: sign-in, API tokens, uploads.

Fixed windows counted in Django's cache: the embedded default's local-memory cache (one
process), or a shared cache (`CACHE_URL=redis://…`) when several web processes serve the
portal. A request over the limit gets 429 with Retry-After, before any work is done.
"""

from __future__ import annotations

import functools
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


def exceeded(rule: Limit, who: str) -> int | None:
    """Count one request of `who`; seconds until the window ends when over the limit."""
    window = int(time.time() // rule.window_s)
    key = f"ratelimit:{rule.scope}:{who}:{window}"
    if cache.add(key, 1, timeout=rule.window_s + 1):
        count = 1
    else:
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=rule.window_s + 1)
            count = 1
    if count > rule.requests:
        return rule.window_s - int(time.time()) % rule.window_s
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
