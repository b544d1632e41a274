"""What every page's header needs to know about the signed-in user."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from portal.accounts.auth import request_team


def user_team(request: HttpRequest) -> dict[str, Any]:
    """The signed-in user's team (None without one): the header links Team and Submit only
    for members of a team, and leads an admin without one to the admin's landing page."""
    user = getattr(request, "user", None)  # absent on pages rendered before authentication
    if user is None or not user.is_authenticated:
        return {"user_team": None, "signup_mode": settings.ATREX_SIGNUP}
    return {"user_team": request_team(request), "signup_mode": settings.ATREX_SIGNUP}
