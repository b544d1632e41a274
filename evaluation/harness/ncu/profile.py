"""Hardware counters for a team's profile: the Nsight Compute command and what its report says.

A profile of one shape runs the candidate's forward once, inside an NVTX range, under ncu
with the clocks left as they are (`--clock-control none`: ncu's default locks them to base,
which is not what the timing stage or a production stream sees) and the caches flushed
before each kernel (`--cache-control all`, as the timing stage's L2 sweep). ncu replays each
kernel once per group of counters it needs, so a profile takes seconds, not microseconds;
durations in it are ncu's own and never scored.

`parse_report` turns ncu's CSV (the long form: one row per kernel and metric, base units)
into one entry per kernel launch: duration, DRAM bytes read and written and their throughput
against the hardware profile's peak, achieved occupancy, SM and tensor-pipe utilisation, L2
hit rate, the unit that limits it, and the clocks ncu saw. Pure: no GPU, no Django; the parser
is tested on reports recorded on the H200 (tests/evaluation/data/ncu/).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

NVTX_RANGE = "atrex_profiled"

# What each reported field is read from (Hopper metric names). Tensor-pipe activity is two
# pipes on Hopper: mma.sync (hmma) and the warpgroup MMA (gmma) that wgmma kernels use.
METRICS: dict[str, str] = {
    "duration": "gpu__time_duration.sum",
    "dram_read": "dram__bytes_read.sum",
    "dram_write": "dram__bytes_write.sum",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "hmma_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "gmma_pct": "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "l2_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1_pct": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "sm_clock": "sm__cycles_elapsed.avg.per_second",
    "dram_clock": "dram__cycles_elapsed.avg.per_second",
}
# Below this share of its peak no unit limits a kernel: it waits (latency, launch, too
# little work), which is what ncu's speed-of-light section says in words.
BUSY_PCT = 60.0
LIMITERS = (("sm_pct", "SM (compute)"), ("dram_pct", "DRAM"), ("l2_pct", "L2"),
            ("l1_pct", "L1/shared"))

_SCALE = {"": 1.0, "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "%": 1.0,
          "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
          "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0,
          "hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9,
          "cycle/second": 1.0, "cycle/usecond": 1e6, "cycle/nsecond": 1e9}


class ReportUnreadable(ValueError):
    """ncu's output holds no kernel rows in the expected form; the message says what."""


@dataclass(frozen=True)
class KernelCounters:
    launch: int  # ncu's ID: the order of the profiled launches
    name: str
    duration_s: float | None
    dram_read_bytes: float | None
    dram_write_bytes: float | None
    dram_bytes_per_s: float | None  # (read + write) / duration
    dram_of_peak: float | None  # that against the hardware profile's HBM peak, 0-1
    dram_throughput_pct: float | None  # ncu's own DRAM throughput, % of its peak
    achieved_occupancy_pct: float | None
    sm_throughput_pct: float | None
    tensor_pipe_pct: float | None  # the busier of the hmma and gmma pipes
    l2_hit_rate_pct: float | None
    limited_by: str  # "DRAM", "SM (compute)", "L2", "L1/shared" or "latency"
    sm_clock_hz: float | None
    dram_clock_hz: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def command(ncu: str, program: Sequence[str], metrics: Iterable[str] = METRICS.values(),
            launch_count: int = 64) -> list[str]:
    """The ncu command line for `program` (a list: the executable and its arguments)."""
    return [ncu, "--clock-control", "none", "--cache-control", "all", "--nvtx",
            "--nvtx-include", f"{NVTX_RANGE}/", "--launch-count", str(launch_count),
            "--metrics", ",".join(metrics), "--csv", "--print-units", "base", *program]


def known_metrics(query_output: str, wanted: Iterable[str] = METRICS.values()) -> list[str]:
    """The wanted metrics whose base name `ncu --query-metrics` lists (ncu refuses a whole
    run over one unknown name; which tensor pipes exist differs between chips)."""
    names = {line.split()[0] for line in query_output.splitlines() if line.strip()}
    return [m for m in wanted if m.split(".")[0] in names]


def parse_report(text: str, hbm_peak_bytes_per_s: float | None = None) -> list[KernelCounters]:
    """One entry per profiled launch, in launch order, from ncu's long CSV form (whatever
    the profiled program printed before it is skipped)."""
    start = text.find('"ID"')
    if start < 0:
        raise ReportUnreadable("no ncu table in the output (no kernel was profiled?)")
    rows = [row for row in csv.reader(io.StringIO(text[start:])) if row]
    header = rows[0]
    try:
        at = {key: header.index(column) for key, column in (
            ("id", "ID"), ("name", "Kernel Name"), ("metric", "Metric Name"),
            ("unit", "Metric Unit"), ("value", "Metric Value"))}
    except ValueError as exc:
        raise ReportUnreadable(f"an ncu table without the column {exc}") from None
    by_launch: dict[int, dict[str, Any]] = {}
    for row in rows[1:]:
        if len(row) < len(header) or not row[at["id"]].strip().isdigit():
            continue  # a line the program printed between ncu's rows
        launch = by_launch.setdefault(int(row[at["id"]]), {"name": row[at["name"]]})
        launch[row[at["metric"]]] = _value(row[at["value"]], row[at["unit"]])
    if not by_launch:
        raise ReportUnreadable("the ncu table holds no kernel rows")
    return [_counters(launch, values, hbm_peak_bytes_per_s)
            for launch, values in sorted(by_launch.items())]


def _value(text: str, unit: str) -> float | None:
    cleaned = text.replace(",", "").strip()
    if cleaned in ("", "n/a", "N/A"):
        return None
    try:
        number = float(cleaned)
    except ValueError:
        return None
    return number * _SCALE.get(unit.strip().lower(), 1.0)


def _counters(launch: int, values: Mapping[str, Any],
              hbm_peak: float | None) -> KernelCounters:
    def get(key: str) -> float | None:
        found = values.get(METRICS[key])
        return found if isinstance(found, float) else None

    duration, read, write = get("duration"), get("dram_read"), get("dram_write")
    moved = (read or 0.0) + (write or 0.0) if read is not None or write is not None else None
    rate = moved / duration if moved is not None and duration else None
    pipes = [p for p in (get("hmma_pct"), get("gmma_pct")) if p is not None]
    return KernelCounters(
        launch=launch, name=str(values["name"]), duration_s=duration, dram_read_bytes=read,
        dram_write_bytes=write, dram_bytes_per_s=rate,
        dram_of_peak=rate / hbm_peak if rate is not None and hbm_peak else None,
        dram_throughput_pct=get("dram_pct"), achieved_occupancy_pct=get("occupancy_pct"),
        sm_throughput_pct=get("sm_pct"), tensor_pipe_pct=max(pipes) if pipes else None,
        l2_hit_rate_pct=get("l2_hit_pct"), limited_by=limiting_unit(values),
        sm_clock_hz=get("sm_clock"), dram_clock_hz=get("dram_clock"))


def limiting_unit(values: Mapping[str, Any]) -> str:
    """The unit nearest its peak, or "latency" when none is busy (BUSY_PCT)."""
    shares = [(values.get(METRICS[key]), label) for key, label in LIMITERS]
    known = [(share, label) for share, label in shares if isinstance(share, float)]
    if not known:
        return "unknown"
    share, label = max(known)
    return label if share >= BUSY_PCT else "latency"


def clocks_seen(kernels: Sequence[KernelCounters]) -> dict[str, float | None]:
    """The SM and memory clocks ncu measured over the profiled kernels (lowest, highest)."""
    sm = [k.sm_clock_hz for k in kernels if k.sm_clock_hz]
    dram = [k.dram_clock_hz for k in kernels if k.dram_clock_hz]
    return {"sm_clock_min_hz": min(sm, default=None), "sm_clock_max_hz": max(sm, default=None),
            "dram_clock_min_hz": min(dram, default=None),
            "dram_clock_max_hz": max(dram, default=None)}
