"""`atrex history` names as best what the board would: a failed submission's 0 never beats a
correct one that was not timed (a CPU portal times nothing)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from atrex_cli.iteration import best_entry, history_table


def entry(n: int, s_op: float | None, correct: int, minute: int) -> dict[str, Any]:
    return {"submission": n, "created_at": f"2026-12-02T10:{minute:02d}:00Z",
            "release": {"name": "atrex-fixture", "version": 1}, "hardware": "H200",
            "status": "scored", "mode": "ranked", "s_op": s_op, "correct": correct, "native": correct,
            "shapes_total": 2, "verdicts": {}, "source_changed": False, "interpreter": False,
            "previous": None, "sha256": "ab" * 32}


def caption(entries: list[dict[str, Any]]) -> str:
    doc = {"operator": "rms_norm", "team": "Red", "entries": entries, "truncated": False}
    console = Console(file=io.StringIO(), width=200)
    console.print(history_table(doc))
    return str(history_table(doc).caption)


def test_a_correct_untimed_submission_is_best_over_one_whose_every_shape_failed() -> None:
    untimed, failed = entry(1, None, 2, 1), entry(2, 0.0, 0, 2)
    assert best_entry([untimed, failed]) is untimed
    assert caption([untimed, failed]).startswith("best: submission 1, 2/2 shapes correct, not timed")


def test_timed_scores_decide_then_the_share_correct_then_the_newer() -> None:
    slow, fast, fast_fewer = entry(1, 0.3, 2, 1), entry(2, 0.6, 2, 2), entry(3, 0.6, 1, 3)
    assert best_entry([slow, fast, fast_fewer]) is fast
    assert best_entry([fast, entry(4, 0.6, 2, 4)])["submission"] == 4  # type: ignore[index]
    assert caption([slow, fast]).startswith("best S_op 0.600 (submission 2)")


def test_with_no_correct_shape_nothing_is_called_best() -> None:
    assert best_entry([entry(1, 0.0, 0, 1)]) is None
    assert caption([entry(1, 0.0, 0, 1)]).startswith("no submission has a correct shape yet")
