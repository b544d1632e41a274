"""Reading rendered pages in tests."""

from __future__ import annotations

import re


def text(html: str) -> str:
    """An HTML fragment's words, one space apart and padded: " failed 0 of 2 ... "."""
    return " " + " ".join(re.sub(r"<[^>]+>", " ", html).split()) + " "
