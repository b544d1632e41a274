"""How the problem pages print a shape's arguments: a long list (a batch's sequence lengths)
as its first values and its length, the whole list on hover; one argument never wraps."""

from __future__ import annotations

import json

from django import template

register = template.Library()
SHOWN_ITEMS = 4  # a longer list shows this many, then "…" and its length


@register.filter
def argument_text(value: object) -> str:
    """`[512, 384, 1024, 96, …] (32 values)` for a long list; the value as JSON otherwise."""
    if isinstance(value, list | tuple) and len(value) > SHOWN_ITEMS + 1:
        head = ", ".join(json.dumps(item) for item in value[:SHOWN_ITEMS])
        return f"[{head}, …] ({len(value)} values)"
    return json.dumps(value) if isinstance(value, list | tuple | dict) else str(value)


@register.filter
def argument_title(value: object) -> str:
    """The whole value, for the tooltip of a shortened one ("" when nothing was cut)."""
    if isinstance(value, list | tuple) and len(value) > SHOWN_ITEMS + 1:
        return json.dumps(value)
    return ""
