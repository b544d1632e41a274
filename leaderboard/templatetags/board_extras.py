from typing import Any

from django import template

register = template.Library()


@register.filter
def get_item(row: dict[str, Any], key: str) -> Any:
    return row.get(key)


@register.filter
def score_text(value: float | None) -> str:
    """A score or attainment as every page prints it: None is "not timed" (a correct result
    without a GPU time, which is not 0), a number has three decimals."""
    return "not timed" if value is None else f"{value:.3f}"


@register.filter
def after_status(summary: str) -> str:
    """"failed: 0 of 14 shapes correct" -> "0 of 14 shapes correct" (the status is a badge)."""
    return summary.split(": ", 1)[-1]
