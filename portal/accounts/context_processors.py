"""What every page's header needs to know about the signed-in user."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from portal.accounts.viewer import ViewerRequest


def user_team(request: ViewerRequest) -> dict[str, Any]:
    """The signed-in user's team (None without one): the header links Team and Submit only
    for members of a team, and leads an admin without one to the admin's landing page."""
    # absent on pages rendered before authentication (and then `viewer` too)
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"user_team": None, "signup_mode": settings.ATREX_SIGNUP}
    return {"user_team": request.viewer.team, "signup_mode": settings.ATREX_SIGNUP}
