"""Uploads per team: one budget for the API and the upload page (portal/throttles.py)."""

from __future__ import annotations

from typing import Any

from portal.throttles import PortalThrottle


class UploadThrottle(PortalThrottle):
    scope = "upload"

    def ident(self, request: Any) -> str | None:
        # Only POSTs upload (a GET of the same API address lists submissions); a request
        # with no team is refused by the view itself (401/403) and uploads nothing.
        if request.method != "POST":
            return None
        team = request.viewer.team
        return None if team is None else f"team:{team.pk}"
