"""A team name's skeleton: two names with one skeleton look alike on a board.

After Unicode's TR39 skeleton, for the scripts a lookalike name is made of: compatibility
forms folded (NFKD: fullwidth and styled letters), accents dropped, case folded, letters of
Cyrillic, Greek and Armenian that are drawn like Latin ones mapped to them, the glyph pairs
readers mix up ("rn" and "m", "0" and "o", "1", "l" and "I") merged, and everything but
letters and digits ignored. "Red Team", "red-team" and "Rеd Team" (a Cyrillic е) share one.
"""

from __future__ import annotations

import unicodedata

# Lookalikes of Latin letters in other scripts (lower case: the name is case-folded first).
_LOOKALIKES = {
    # Cyrillic
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i",
    "ј": "j", "к": "k", "ӏ": "l", "м": "m", "н": "h", "о": "o", "р": "p", "ԛ": "q", "г": "r",
    "ѕ": "s", "т": "t", "и": "u", "ѵ": "v", "ԝ": "w", "х": "x", "у": "y", "з": "3", "ь": "b",
    "ɡ": "g", "ү": "y", "ԍ": "g", "ԃ": "d", "ѡ": "w", "ʏ": "y",
    # Greek
    "α": "a", "β": "b", "ϲ": "c", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o",
    "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "γ": "y", "ω": "w", "ϳ": "j", "ζ": "z", "μ": "u",
    # Armenian
    "օ": "o", "ս": "u", "ց": "g", "հ": "h", "ո": "n", "ք": "p", "զ": "q", "ա": "w",
    # Latin letters drawn like others
    "ı": "i", "ȷ": "j", "ł": "l", "ø": "o", "đ": "d", "ħ": "h", "ŀ": "l",
}
# Glyphs a reader takes for one another, merged last (the skeleton's letters only).
_MIXED_UP = (("rn", "m"), ("vv", "w"), ("cl", "d"), ("0", "o"), ("1", "l"), ("i", "l"),
             ("|", "l"))


def skeleton(name: str) -> str:
    """The form two lookalike names share (see the module's docstring)."""
    decomposed = unicodedata.normalize("NFKD", name)
    letters = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
    mapped = "".join(_LOOKALIKES.get(ch, ch) for ch in letters)
    kept = "".join(ch for ch in mapped if ch.isalnum())
    for glyphs, same in _MIXED_UP:
        kept = kept.replace(glyphs, same)
    return kept
