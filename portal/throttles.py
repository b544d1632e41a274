"""Rate limits on the endpoints worth attacking: sign-in, API tokens, uploads.

Django REST framework's throttles, one scope each, their rates in
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] (portal/settings.py). What they count lives in
Django's default cache: the embedded default's local-memory cache (one process), or a shared
cache (`CACHE_URL=redis://…`) when several web processes serve the portal. API views name
them in `throttle_classes`; the sign-in pages, the upload page and the token authenticator
are not DRF views (or must count a failure before raising it), so they call `refusal()`, the
same classes' allow_request/wait. A request over the limit gets 429 with Retry-After before
any work is done; a refused request is not counted.

The window slides: a request is refused while the limit's worth of requests were counted in
the last minute, and Retry-After is when the oldest of them leaves it. No whole-minute
boundary resets the count, so a burst that straddles one is still held to the limit.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

if TYPE_CHECKING:
    # not at run time: rest_framework.views imports the authentication, which imports this
    from rest_framework.views import APIView

View = Callable[..., HttpResponseBase]


class PortalThrottle(SimpleRateThrottle):
    """DRF's SimpleRateThrottle, keyed by `ident()`."""

    duration: int  # the window in seconds, parsed from the rate by DRF's __init__

    def get_rate(self) -> str | None:
        # DRF's own reads THROTTLE_RATES, bound once when rest_framework.throttling is
        # imported; reading the settings now lets an override (the tests') apply. The rates
        # are "N/min" strings (portal/settings.py).
        self.THROTTLE_RATES = cast("dict[str, str | None]", api_settings.DEFAULT_THROTTLE_RATES)
        return super().get_rate()

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        who = self.ident(request)
        return None if who is None else self.cache_format % {"scope": self.scope, "ident": who}

    def ident(self, request: Any) -> str | None:
        """Whose budget `request` spends; None: it is not counted."""
        raise NotImplementedError


def client_address(request: Any) -> str:
    # REMOTE_ADDR, not DRF's get_ident: that trusts X-Forwarded-For, which any client can
    # write, so a guesser could spend a fresh budget on every request.
    return str(request.META.get("REMOTE_ADDR", "unknown"))


class LoginThrottle(PortalThrottle):
    """Sign-in attempts per client address, on the portal's and the admin's sign-in alike."""

    scope = "login"

    def ident(self, request: Any) -> str:
        return client_address(request)


class TokenFailureThrottle(PortalThrottle):
    """Invalid API tokens per client address (counted by the token authenticator)."""

    scope = "token"

    def ident(self, request: Any) -> str:
        return client_address(request)


def refusal(throttle: type[PortalThrottle], request: Any) -> int | None:
    """Count `request` against `throttle`: None when allowed, else whole seconds to wait."""
    rule = throttle()
    # No DRF view handles these requests; PortalThrottle's keys never look at the view.
    if rule.allow_request(request, cast("APIView", None)):
        return None
    wait = rule.wait()
    # DRF has no answer while more requests are counted than the rate allows (it was
    # lowered): the full window is then a wait that is never too short.
    return max(1, math.ceil(rule.duration if wait is None else wait))


def too_many(retry_after: int, what: str) -> HttpResponse:
    response = HttpResponse(f"Too many {what}; try again in {retry_after} s.\n", status=429,
                            content_type="text/plain")
    response["Retry-After"] = str(retry_after)
    return response


def limited_posts(throttle: type[PortalThrottle], what: str) -> Callable[[View], View]:
    """Decorator for pages: POSTs beyond the throttle's rate answer 429; reading never."""
    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if request.method == "POST":
                wait = refusal(throttle, request)
                if wait is not None:
                    return too_many(wait, what)
            return view(request, *args, **kwargs)
        return wrapped
    return decorate


class SignupThrottle(PortalThrottle):
    """Sign-ups per client address: each one makes a user (and maybe a team)."""

    scope = "signup"

    def ident(self, request: Any) -> str:
        return client_address(request)
