"""Who is asking, as the read side needs it: selectors take a Viewer, never a request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from portal.accounts.auth import is_admin, request_team
from portal.accounts.models import Team


@dataclass(frozen=True)
class Viewer:
    team: Team | None  # the team acting: a token's, or the signed-in member's
    admin: bool  # staff signed in (never by a team token)


def viewer_of(request: Any) -> Viewer:
    """The viewer a page or API request stands for."""
    return Viewer(team=request_team(request), admin=is_admin(request))
