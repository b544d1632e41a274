from typing import Any

from django import template

register = template.Library()


@register.filter
def get_item(row: dict[str, Any], key: str) -> Any:
    return row.get(key)
