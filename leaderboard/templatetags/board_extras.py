from typing import Any

from django import template

from leaderboard.scoring import generalisation_reason_text

register = template.Library()


@register.filter
def get_item(row: dict[str, Any], key: str) -> Any:
    return row.get(key) if isinstance(row, dict) else None  # a score stored before a field: none


@register.filter
def score_text(value: float | None) -> str:
    """A score or attainment as every page prints it: None is "not timed" (a correct result
    without a GPU time, which is not 0), a number has three decimals."""
    return "not timed" if value is None else f"{value:.3f}"


@register.filter
def interval_text(interval: list[float] | None) -> str:
    """A score's 95% interval as pages print it ("0.480 to 0.492"); "–" where unknown."""
    return "–" if not interval else f"{interval[0]:.3f} to {interval[1]:.3f}"


@register.filter
def generalisation_reason(reason: dict[str, Any]) -> str:
    """One hidden shape that flagged its operator, against its public sibling, with both
    figures (leaderboard/scoring.generalisation_reason_text)."""
    return generalisation_reason_text(reason) if isinstance(reason, dict) else ""


@register.filter
def plus_minus(row: dict[str, Any]) -> str:
    """"± 0.006": half a row's 95% interval above its score (the low end may be cut at 0)."""
    interval, value = row.get("interval"), row.get(row.get("ranked_by") or "score")
    return "" if not interval or value is None else f"± {interval[1] - value:.3f}"


@register.filter
def after_status(summary: str) -> str:
    """"failed: 0 of 14 shapes correct" -> "0 of 14 shapes correct" (the status is a badge)."""
    return summary.split(": ", 1)[-1]
