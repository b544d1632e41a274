"""Running Nsight Compute over a script's NVTX ranges and reading its kernel times back.

The measuring scripts profile one process that marks its regions with an NVTX range; ncu
reports `gpu__time_duration.sum` per kernel launched in them, in launch order.
"""

from __future__ import annotations

import csv
import glob
import io
import shutil
import subprocess
import sys
from collections.abc import Sequence

NVTX_RANGE = "atrex_timed"
# ncu prints units it was asked for in base units: seconds' SI prefixes as it writes them
UNIT_SECONDS = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3,
                "ms": 1e-3, "second": 1.0, "s": 1.0}


def find_ncu() -> str:
    found = shutil.which("ncu") or next(iter(sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))),
                                         None)
    if found is None:
        raise SystemExit("ncu not found (PATH, /opt/nvidia/nsight-compute/*/ncu)")
    return found


def profile_kernels(script_args: Sequence[str], cache_control: str = "none",
                    timeout_s: float = 900) -> list[tuple[str, float]]:
    """(kernel name, seconds) for every kernel the script launches inside NVTX_RANGE, run as
    `python script_args...` under ncu with the clocks left alone (METHOD.md)."""
    command = [find_ncu(), "--clock-control", "none", "--cache-control", cache_control, "--nvtx",
               "--nvtx-include", f"{NVTX_RANGE}/", "--metrics", "gpu__time_duration.sum",
               "--csv", "--print-units", "base", sys.executable, *script_args]
    out = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    rows = kernel_rows(out.stdout)
    if not rows:
        raise RuntimeError(f"ncu gave no kernel rows:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return rows


def kernel_rows(stdout: str) -> list[tuple[str, float]]:
    """ncu's --csv output (after whatever the profiled program printed) as (name, seconds)."""
    start = stdout.find('"ID"')
    if start < 0:
        return []
    table = [row for row in csv.reader(io.StringIO(stdout[start:])) if row]
    header, body = table[0], table[1:]
    name, value, unit = (header.index("Kernel Name"), header.index("Metric Value"),
                         header.index("Metric Unit"))
    return [(row[name], float(row[value].replace(",", "")) * UNIT_SECONDS.get(row[unit], 1e-9))
            for row in body]
