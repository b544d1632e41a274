"""The iteration pages' formatting (diff lines, microseconds, signed deltas). The team and
submission pages' links into them are read by their views (submissions.selectors)."""

from __future__ import annotations

from typing import Any

from django import template

from leaderboard.iteration import diff_lines
from leaderboard.templatetags.board_extras import score_text
from submissions.models import EvaluationJob

register = template.Library()


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
    if not side or side.get("status") in (*EvaluationJob.Status.active(), "empty"):
        return "–"
    return score_text(side.get("s_op"))


@register.filter
def signed(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:+.{digits}f}"
