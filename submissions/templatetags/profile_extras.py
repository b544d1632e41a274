"""Formatting of a shape's profile (submissions/profile.py) on the submission page."""

from __future__ import annotations

from typing import Any

from django import template

from submissions.environment import environment_text

register = template.Library()


@register.filter
def micros(seconds: float | None) -> str:
    """Seconds as microseconds with two decimals; "–" for none."""
    return "–" if seconds is None else f"{seconds * 1e6:.2f} µs"


@register.filter
def percent(fraction: float | None) -> str:
    return "–" if fraction is None else f"{fraction * 100:.1f}%"


@register.filter
def bandwidth(bytes_per_s: float | None) -> str:
    return "–" if bytes_per_s is None else f"{bytes_per_s / 1e12:.2f} TB/s"


@register.filter
def flop_rate(flops_per_s: float | None) -> str:
    return "–" if flops_per_s is None else f"{flops_per_s / 1e12:.1f} TFLOP/s"



@register.filter(name="environment_text")
def environment_text_filter(environment: dict[str, Any] | None) -> str:
    return environment_text(environment)


@register.filter
def every_shape_failed(results: list[dict[str, object]]) -> bool:
    """A job whose every evaluated shape failed: its "scored" status is no success."""
    return bool(results) and all(r.get("status") != "passed" for r in results)
