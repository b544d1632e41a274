"""Where a read found nothing a view may show: the one 404, for pages and API alike (DRF
answers Django's Http404 as its JSON 404)."""

from __future__ import annotations

from typing import TypeVar

from django.http import Http404

T = TypeVar("T")


def or_404(found: T | None, what: str) -> T:
    if found is None:
        raise Http404(what)
    return found
