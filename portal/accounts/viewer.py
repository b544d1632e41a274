"""Who is asking, as the read side needs it: selectors take a Viewer, never a request.

It is worked out once per request and carried as `request.viewer` (ViewerMiddleware); views
read that, never the session or the token again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from django.http import HttpRequest, HttpResponseBase
from django.utils.functional import SimpleLazyObject
from rest_framework.request import Request

from portal.accounts.auth import is_admin, request_team
from portal.accounts.models import Team
from portal.htmx import HtmxRequest


@dataclass(frozen=True)
class Viewer:
    team: Team | None  # the team acting: a token's, or the signed-in member's
    admin: bool  # staff signed in (never by a team token)


def viewer_of(request: Any) -> Viewer:
    """The viewer a page or API request stands for."""
    return Viewer(team=request_team(request), admin=is_admin(request))


class ViewerMiddleware:
    """Sets `request.viewer`, worked out on first use and kept for the rest of the request.

    Lazy because an API view's team token is read by DRF after every middleware has run: by
    the time a view reads `request.viewer`, DRF has authenticated, and its Request sets the
    user and the token on this request too (DRF's `Request` passes `.viewer` through)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        lazy = SimpleLazyObject(lambda: viewer_of(request))
        cast(ViewerRequest, request).viewer = cast(Viewer, lazy)
        return self.get_response(request)


class ViewerRequest(HtmxRequest):
    """The request type of pages that read who is asking (and, as every page may, htmx's
    request details)."""

    viewer: Viewer


class ViewerApiRequest(Request):
    """The request type of API views that read who is asking."""

    viewer: Viewer
