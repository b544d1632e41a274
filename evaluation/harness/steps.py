"""Where an evaluation's seconds go: wall seconds and counts per named step of one shape.

Diagnostic only, never scored. The trusted side times its own steps (drawing inputs, the
reference, reading and comparing outputs) and each round trip to the child; the child
reports its side of each request (its inputs, the candidate's calls, writing outputs, the
timing stage's warm-up, capture and samples), and the difference is the channel's.
A child's report is untrusted: it is checked to be numbers (`checked_child_steps`) and used
only to show where the time went.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator, Mapping
from typing import Any

MAX_CHILD_STEPS = 40  # a report with more names than the harness has steps is malformed


class Steps:
    """Accumulates seconds and counts per step name; `with steps("name"): ...`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def add(self, name: str, seconds: float, count: int = 1) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.counts[name] = self.counts.get(name, 0) + count

    def merge(self, prefix: str, seconds: Mapping[str, float], counts: Mapping[str, int]) -> None:
        for name, value in seconds.items():
            self.add(f"{prefix}{name}", value, counts.get(name, 1))

    def as_report(self) -> dict[str, dict[str, Any]]:
        return {"seconds": dict(self.seconds), "counts": dict(self.counts)}


def checked_child_steps(report: object) -> tuple[dict[str, float], dict[str, int]]:
    """A child's {"seconds": {...}, "counts": {...}}, or empty ones where it is malformed."""
    if not isinstance(report, dict):
        return {}, {}
    seconds, counts = report.get("seconds"), report.get("counts")
    if not isinstance(seconds, dict) or not isinstance(counts, dict) \
            or len(seconds) > MAX_CHILD_STEPS or len(counts) > MAX_CHILD_STEPS:
        return {}, {}
    good_seconds = {str(k)[:40]: float(v) for k, v in seconds.items()
                    if isinstance(v, int | float) and not isinstance(v, bool)
                    and math.isfinite(v) and v >= 0}
    good_counts = {str(k)[:40]: int(v) for k, v in counts.items()
                   if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
    return good_seconds, good_counts
