"""The harness's timing report as the benchmarks read it (a result's `timing`, or
`TimingReport.to_dict()`): the wall-time key named once (evaluation/harness/result_schema.json)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaluation.harness.timing import WALL_FIELD

WALL_KEY = WALL_FIELD  # the end-to-end wall time of one call, no profiler running


def wall_time_s(timing: Mapping[str, Any]) -> float | None:
    """The wall time of one call in a timing report; None where it has none."""
    value = timing.get(WALL_KEY)
    return float(value) if isinstance(value, int | float) else None
