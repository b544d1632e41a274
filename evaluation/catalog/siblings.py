"""A hidden shape's public sibling: the public shape the generalisation flag compares it with.

Every hidden shape is a public shape with one production-varying size changed (tokens, batch,
M, the sequence lengths) and the sizes that follow from it: the starter's generated tier is
made so from a named public shape (evaluation/release_tools/make_starter_hidden_shapes.py), and
a release that ships hidden_shapes.json is held to the same (docs/admins.md). The sibling is
read back from the shapes alone, so it needs neither the admin's secret nor a stored link: of
the operator's public shapes, the one most like the hidden shape, by in order

1. the same init arguments (the same model and layer);
2. the same input arguments, the fewest of them different (one size and what follows from it);
3. the fewest words of the id different (the same model, layer and phase: "decode" stays);
4. the nearest sizes, |log(hidden / public)| summed over the sizes that differ;
5. the id, so that the choice never depends on the order shapes were read in.

Among public shapes of one layer and phase that differ only in the token count, that is the
one nearest in tokens: the fairest comparison of one kernel on two sizes. Pure: no Django.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

ShapeCall = Mapping[str, Any]  # shapes.json's entry: {"init_kwargs": ..., "input_kwargs": ...}


def public_sibling(hidden_id: str, hidden: ShapeCall,
                   public: Mapping[str, ShapeCall]) -> str | None:
    """The id of `hidden`'s sibling among `public` (id -> call); None when there is none."""
    if not public:
        return None
    return min(public, key=lambda public_id: _distance(hidden_id, hidden, public_id,
                                                       public[public_id]))


def _distance(hidden_id: str, hidden: ShapeCall, public_id: str,
              public: ShapeCall) -> tuple[int, int, int, int, float, str]:
    hidden_inputs = dict(hidden.get("input_kwargs") or {})
    public_inputs = dict(public.get("input_kwargs") or {})
    differing = [key for key in hidden_inputs.keys() & public_inputs.keys()
                 if hidden_inputs[key] != public_inputs[key]]
    return ((hidden.get("init_kwargs") or {}) != (public.get("init_kwargs") or {}),
            len(hidden_inputs.keys() ^ public_inputs.keys()),
            len(differing),
            _words_apart(hidden_id, public_id),
            sum(_size_distance(hidden_inputs[key], public_inputs[key]) for key in differing),
            public_id)


def _words_apart(a: str, b: str) -> int:
    words_a, words_b = Counter(a.split("-")), Counter(b.split("-"))
    return sum(((words_a - words_b) + (words_b - words_a)).values())


def _size_distance(a: Any, b: Any) -> float:
    """How far two values of one argument lie apart: log ratio for positive numbers, element
    by element for lists of them (sequence lengths) plus their counts; 1 otherwise."""
    if _positive(a) and _positive(b):
        return abs(math.log(float(a) / float(b)))
    if isinstance(a, list) and isinstance(b, list) and all(map(_positive, [*a, *b])) and a and b:
        return abs(math.log(sum(a) / sum(b))) + abs(math.log(len(a) / len(b)))
    return 1.0


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def siblings(hidden: Mapping[str, ShapeCall], public: Mapping[str, ShapeCall],
             among: Iterable[str] | None = None) -> dict[str, str | None]:
    """Each hidden shape's sibling, chosen among the public shapes `among` (default: all)."""
    chosen = public if among is None else {k: public[k] for k in among if k in public}
    return {hidden_id: public_sibling(hidden_id, call, chosen)
            for hidden_id, call in hidden.items()}
