"""Links into the iteration pages from the team and submission pages, and the compare page's
formatting (diff lines, microseconds, signed deltas)."""

from __future__ import annotations

from typing import Any

from django import template

from leaderboard.iteration import compare_choices, diff_lines, team_operators
from leaderboard.templatetags.board_extras import score_text
from portal.accounts.auth import request_team
from portal.accounts.models import Team
from portal.accounts.viewer import viewer_of
from submissions.models import Submission
from submissions.selectors import submissions_visible

register = template.Library()


@register.inclusion_tag("leaderboard/_team_history_links.html")
def team_history_links(team: Team) -> dict[str, Any]:
    return {"operators": team_operators(team)}


@register.inclusion_tag("leaderboard/_submission_iteration_links.html", takes_context=True)
def submission_iteration_links(context: dict[str, Any], submission: Submission) -> dict[str, Any]:
    """Compare with the team's other submissions; each operator's history, for the team only
    (a history is always the viewer's own team's)."""
    request = context["request"]
    own = request_team(request) == submission.team
    recent = (submissions_visible(viewer_of(request)).filter(team=submission.team)
              .order_by("-created_at"))
    return {"submission": submission,
            "operators": sorted(submission.candidates.values_list("operator__name", flat=True))
            if own else [],
            "choices": compare_choices(recent[:50], submission)}


@register.filter
def diff_rows(diff: str) -> list[tuple[str, str]]:
    return diff_lines(diff)


@register.filter
def micro(row: dict[str, Any] | None) -> str:
    """A shape's median time in microseconds, for the compare page's time columns: "not
    timed" for a correct shape without a GPU time (not 0), "–" for no time to show."""
    if not row:
        return "–"
    if row.get("median_s") is not None:
        return f"{row['median_s'] * 1e6:.2f}"
    return "not timed" if row.get("status") == "passed" else "–"


@register.filter
def s_op_text(side: dict[str, Any] | None) -> str:
    """An operator's S_op on the compare page: "not timed" when the operator has no time
    but was evaluated (a correct shape without a GPU time), "–" when there is nothing."""
    if not side or side.get("status") in ("queued", "running", "empty"):
        return "–"
    return score_text(side.get("s_op"))


@register.filter
def signed(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:+.{digits}f}"
