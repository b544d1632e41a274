"""Importance weights from PyTorch profiler traces (Chrome-trace JSON, gzip or not).

Pure functions over plain data. A trace's GPU time (kernels, memcpy, memset) is attributed
to the release's operators by mapping rules stored with the release:

    {"rules": [{"operator": "rms_norm", "annotation": "^atrex::rms_norm$"},
               {"operator": "rms_norm", "kernel": "rms_norm_kernel"}]}

An "annotation" rule matches a `record_function` range (category user_annotation) that
was open on the CPU thread when the kernel was launched (found through the launch's
correlation id; the innermost matching range wins). A "kernel" rule is a regular
expression searched in the kernel's name. Annotation rules are tried first, then kernel
rules, each in file order; GPU time no rule claims is reported as unattributed.

Each trace gives time shares per operator; traces are combined weighted by the card-hours
of the deployment they came from (equal by default), and the weights are the combined
shares renormalised over the attributed time.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRACE_RULES_FILE = "trace_rules.json"  # in a release's data/ folder
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}


class TraceError(ValueError):
    """A trace or rule file that cannot be used; the message names the file."""


@dataclass(frozen=True)
class Rule:
    operator: str
    pattern: re.Pattern[str]
    on: str  # "annotation" or "kernel"


@dataclass
class TraceShares:
    name: str
    phase: str
    card_hours: float
    gpu_time_us: float
    by_operator: dict[str, float] = field(default_factory=dict)  # share of gpu_time_us
    unattributed: float = 0.0
    top_unattributed: list[tuple[str, float]] = field(default_factory=list)


def parse_rules(doc: Any, operators: Iterable[str], where: str) -> list[Rule]:
    known = set(operators)
    if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
        raise TraceError(f"{where}: expected {{\"rules\": [...]}}")
    rules = []
    for index, entry in enumerate(doc["rules"]):
        field_name = f"{where}: rules[{index}]"
        if not isinstance(entry, dict) or entry.get("operator") not in known:
            raise TraceError(f"{field_name}.operator: not an operator of the release")
        kinds = [k for k in ("annotation", "kernel") if k in entry]
        if len(kinds) != 1:
            raise TraceError(f"{field_name}: needs exactly one of annotation, kernel")
        try:
            pattern = re.compile(str(entry[kinds[0]]))
        except re.error as exc:
            raise TraceError(f"{field_name}.{kinds[0]}: bad regular expression: {exc}") from None
        rules.append(Rule(operator=entry["operator"], pattern=pattern, on=kinds[0]))
    return rules


def rules_from_metadata(metadata: Mapping[str, Mapping[str, Any] | None]) -> list[Rule]:
    """Default rules for a release without trace_rules.json: the kernel names its
    metadata.json gives per shape (origin_kernel, up to the first " ("), per operator."""
    rules = []
    for operator, meta in sorted(metadata.items()):
        names = {str(s.get("origin_kernel")).split(" (")[0].split("::")[-1]
                 for s in ((meta or {}).get("shapes") or {}).values()
                 if isinstance(s, dict) and s.get("origin_kernel")}
        rules += [Rule(operator, re.compile(re.escape(n)), "kernel") for n in sorted(names) if n]
    return rules


def read_trace(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        doc = json.loads(raw)
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path.name}: not a Chrome-trace JSON file ({exc})") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceError(f"{path.name}: no traceEvents list")
    return [e for e in events if isinstance(e, dict)]


def trace_shares(events: Sequence[Mapping[str, Any]], rules: Sequence[Rule], *, name: str,
                 phase: str, card_hours: float = 1.0) -> TraceShares:
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]
    total = sum(float(e.get("dur", 0)) for e in gpu)
    if total <= 0:
        raise TraceError(f"{name}: no GPU kernel time in the trace (was CUDA activity "
                         "profiled?)")
    ranges = _AnnotationIndex(events) if any(r.on == "annotation" for r in rules) else None
    launches = {(e.get("args") or {}).get("correlation"): e for e in events
                if e.get("cat") in LAUNCH_CATEGORIES and (e.get("args") or {}).get("correlation")
                is not None}
    attributed: dict[str, float] = {}
    unattributed: dict[str, float] = {}
    for event in gpu:
        duration = float(event.get("dur", 0))
        operator = None
        if ranges is not None:
            launch = launches.get((event.get("args") or {}).get("correlation"))
            if launch is not None:
                operator = _match(rules, "annotation", ranges.open_at(launch))
        if operator is None:
            operator = _match(rules, "kernel", [str(event.get("name", ""))])
        if operator is None:
            key = str(event.get("name", ""))[:80]
            unattributed[key] = unattributed.get(key, 0.0) + duration
        else:
            attributed[operator] = attributed.get(operator, 0.0) + duration
    top = sorted(unattributed.items(), key=lambda item: -item[1])[:5]
    return TraceShares(name=name, phase=phase, card_hours=card_hours, gpu_time_us=total,
                       by_operator={op: t / total for op, t in sorted(attributed.items())},
                       unattributed=sum(unattributed.values()) / total,
                       top_unattributed=[(k, t / total) for k, t in top])


def combine_traces(traces: Sequence[TraceShares]) -> tuple[dict[str, float], dict[str, Any]]:
    """Card-hour-weighted shares across traces -> (weights summing to 1, report)."""
    hours = sum(t.card_hours for t in traces)
    if not traces or hours <= 0:
        raise TraceError("no trace with positive card-hours")
    combined: dict[str, float] = {}
    by_phase: dict[str, dict[str, float]] = {}
    phase_hours: dict[str, float] = {}
    for trace in traces:
        phase_hours[trace.phase] = phase_hours.get(trace.phase, 0.0) + trace.card_hours
        for op, share in trace.by_operator.items():
            combined[op] = combined.get(op, 0.0) + share * trace.card_hours / hours
    for trace in traces:
        shares = by_phase.setdefault(trace.phase, {})
        for op, share in trace.by_operator.items():
            shares[op] = shares.get(op, 0.0) + share * trace.card_hours / phase_hours[trace.phase]
    attributed = sum(combined.values())
    if attributed <= 0:
        raise TraceError("no GPU time was attributed to any operator: check the mapping rules")
    weights = {op: share / attributed for op, share in sorted(combined.items())}
    report = {
        "traces": [{"file": t.name, "phase": t.phase, "card_hours": t.card_hours,
                    "gpu_time_us": round(t.gpu_time_us, 1),
                    "unattributed_share": t.unattributed,
                    "top_unattributed_kernels": t.top_unattributed,
                    "shares": t.by_operator} for t in traces],
        "share_by_phase": by_phase,
        "share": combined,
        "unattributed_share": 1.0 - attributed,
    }
    return weights, report


def _match(rules: Sequence[Rule], on: str, names: Sequence[str]) -> str | None:
    for name in names:  # innermost annotation first
        for rule in rules:
            if rule.on == on and rule.pattern.search(name):
                return rule.operator
    return None


class _AnnotationIndex:
    """record_function ranges per CPU thread, to find those open at a launch."""

    def __init__(self, events: Sequence[Mapping[str, Any]]) -> None:
        self._ranges: dict[tuple[Any, Any], list[tuple[float, float, str]]] = {}
        for e in events:
            if e.get("ph") == "X" and e.get("cat") == "user_annotation":
                start = float(e.get("ts", 0))
                self._ranges.setdefault((e.get("pid"), e.get("tid")), []).append(
                    (start, start + float(e.get("dur", 0)), str(e.get("name", ""))))
        self._starts = {}
        for key, ranges in self._ranges.items():
            ranges.sort()
            self._starts[key] = [r[0] for r in ranges]

    def open_at(self, launch: Mapping[str, Any]) -> list[str]:
        """Names of the ranges enclosing the launch, innermost (latest start) first."""
        key = (launch.get("pid"), launch.get("tid"))
        ranges = self._ranges.get(key, [])
        ts = float(launch.get("ts", 0))
        end = bisect.bisect_right(self._starts.get(key, []), ts)
        return [name for start, stop, name in reversed(ranges[:end]) if stop >= ts]
