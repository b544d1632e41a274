"""What the profiler's device records say about the timed samples: one window per sample
between the harness's markers (its span, busy time and kernels; whether CUDA events around
the call could see all of it), and the gaps between samples checked against what the
harness's own work launches (GapAllowance). Markers out of order, or work in a gap that is
not the harness's, fail the shape.

Read inside the sandboxed child by timing.py; the parent records the gap allowance.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch.autograd import DeviceType  # type: ignore[attr-defined]

Record = tuple[str, int, int]  # a device activity: name, start and end in ns
RETURNED_MARKER = "_atrex_forward_returned"
END_MARKER = "_atrex_sample_end"


class MarkersForged(RuntimeError):
    """The device records hold markers the harness did not launch."""


class WorkOutsideWindow(RuntimeError):
    """The device ran work between two samples that the harness did not launch."""


@dataclass(frozen=True)
class ForwardWindow:
    """One sample's device activity between its markers, as the profiler recorded it."""

    span_ns: int  # first activity's start to last activity's end
    busy_ns: int  # the union of the activities' intervals
    count: int
    names: frozenset[str]
    # Work that CUDA events around the call cannot see: started before the L2 sweep ended
    # (on a stream that does not wait for it) or ran on after the forward had returned.
    escapes_events: bool


@dataclass(frozen=True)
class GapAllowance:
    """The kernels the harness's own work between two samples launches, by name and count:
    one draw of new contents, and one checked call's save. Recorded by the trusted parent on
    its own tensors (`record_gap_allowance`, before the timing request), never in the child,
    where code of the candidate's has run and could have joined the rehearsal."""

    draw: Counter[str]
    per_check: Counter[str]

    def to_wire(self) -> dict[str, dict[str, int]]:
        return {"draw": dict(self.draw), "per_check": dict(self.per_check)}

    @classmethod
    def from_wire(cls, raw: object) -> GapAllowance | None:
        if not isinstance(raw, dict):
            return None
        parts = [raw.get("draw"), raw.get("per_check")]
        if not all(isinstance(p, dict) and all(isinstance(k, str) and isinstance(v, int)
                                               for k, v in p.items()) for p in parts):
            raise ValueError("a malformed gap allowance")
        return cls(Counter(parts[0]), Counter(parts[1]))


def _kernel_counts(records: Sequence[Record]) -> Counter[str]:
    """How often each kernel ran; copies and memsets are not counted (is_copy)."""
    return Counter(r[0] for r in records if not is_copy(r[0]))


def is_copy(name: str) -> bool:
    """A memcpy or memset record, as CUPTI names them ("Memcpy DtoD (Device -> Device)")."""
    return name.startswith(("Memcpy", "Memset"))


def check_gaps(records: Sequence[Record], start_marker: str, allowance: GapAllowance,
               checks: Sequence[int], forward_names: set[str]) -> None:
    """Every device activity between two samples (before the first, between each, after
    the last) is the harness's own: copies, its markers where they belong, and no more of
    each kernel than one draw (plus one save's checks per checked call) launched when the
    trusted side did the same work (GapAllowance). Anything else is work the candidate moved
    out of its timed window (a hook left to run inside the harness's refill or checks):
    WorkOutsideWindow, naming it."""
    gaps: list[list[str]] = [[]]
    inside = False
    for name, _, _ in records:
        if name == start_marker:
            inside = True
        elif name == END_MARKER and inside:
            inside = False
            gaps.append([])
        elif not inside and name not in (RETURNED_MARKER, END_MARKER) and not is_copy(name):
            gaps[-1].append(name)
    for gap, saves in zip(gaps, list(checks) + [0] * (len(gaps) - len(checks)), strict=True):
        limit = allowance.draw + Counter({k: v * saves for k, v in allowance.per_check.items()})
        extra = Counter(gap) - limit
        if extra:
            names = sorted(extra, key=lambda n: (n not in forward_names, n))
            shown = ", ".join(f"{n} x{extra[n]}" for n in names[:5])
            raise WorkOutsideWindow(
                f"work outside the timed window: between two timed calls the device ran "
                f"{sum(extra.values())} kernel(s) the harness did not launch ({shown}); a "
                "forward's work must happen inside its call")


def device_records(prof: Any) -> list[Record]:
    """(name, start_ns, end_ns) of every device activity: kernels, memcpy, memset."""
    records = []
    for event in prof.profiler.kineto_results.events():
        if event.device_type() == DeviceType.CUDA:
            start = event.start_ns()
            records.append((event.name(), start, start + event.duration_ns()))
    records.sort(key=lambda r: r[1])
    return records


def forward_windows(records: Sequence[Record], start_marker: str,
                    returned_marker: str = RETURNED_MARKER,
                    end_marker: str = END_MARKER) -> list[ForwardWindow]:
    """One window per sample, from its start marker (the L2 sweep) through the marker that
    the forward returned to its end marker (after the device-wide synchronize): every
    device activity in between is the forward's, on whatever stream it ran. Records
    outside a sample (refills, checks) are not counted.

    Raises MarkersForged when the markers do not come in that order: a kernel of the
    candidate named like one of ours would otherwise cut its own work out of the span.
    """
    windows: list[ForwardWindow] = []
    state = "outside"  # -> "forward" (start marker) -> "returned" -> "outside" (end marker)
    swept_at = returned_at = 0
    current: list[Record] = []
    for record in records:
        name = record[0]
        if name == start_marker:
            if state != "outside":
                raise MarkersForged(f"a '{start_marker}' record inside a sample")
            state, swept_at, current = "forward", record[2], []
        elif name == returned_marker:
            if state != "forward":
                raise MarkersForged(f"a '{returned_marker}' record out of place")
            state, returned_at = "returned", record[1]
        elif name == end_marker:
            if state != "returned":
                raise MarkersForged(f"an '{end_marker}' record out of place")
            windows.append(_window(current, swept_at, returned_at))
            state = "outside"
        elif state != "outside":
            current.append(record)
    if state != "outside":
        raise MarkersForged(f"a sample's '{start_marker}' record has no end marker")
    return windows


def _window(records: Sequence[Record], swept_at: int, returned_at: int) -> ForwardWindow:
    if not records:
        return ForwardWindow(0, 0, 0, frozenset(), False)
    return ForwardWindow(
        span_ns=max(r[2] for r in records) - min(r[1] for r in records),
        busy_ns=busy_ns(records),
        count=len(records),
        names=frozenset(r[0] for r in records),
        escapes_events=any(r[1] < swept_at or r[2] > returned_at for r in records),
    )


def busy_ns(records: Sequence[Record]) -> int:
    """Length of the union of the records' [start, end) intervals."""
    total, covered_to = 0, None
    for _, start, end in sorted(records, key=lambda r: r[1]):
        if covered_to is None or start >= covered_to:
            total += end - start
            covered_to = end
        elif end > covered_to:
            total += end - covered_to
            covered_to = end
    return total
