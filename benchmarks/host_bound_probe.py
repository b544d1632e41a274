"""Why a host-bound forward's harness time and a plain wall time can differ (GPU host).

For a few host-bound public references, rounds that alternate, so drift of the host's
state over seconds hits both alike:
  plain    - events around the forward on the same buffers, after the harness's L2 sweep and a
             synchronize: the measurement report's wall time;
  fresh    - the same, after new contents were copied into the buffers, as the harness
             refills them before every timed call (timed_calls.FreshInputs);
  harness  - one sample as timing.Sampler takes it, unprofiled (refill, the harness's
             sweep kernel, persisting-L2 reset, synchronize, events, its markers).
Then timing.measure_forward on the same forward. Prints medians and p10/p90 per kind.

Usage: python benchmarks/host_bound_probe.py --public-release DIR [--rounds 30] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import _path  # noqa: F401 (the repository root on sys.path)
import torch
from _wire import wall_time_s
from measurement_report import Case, load_case

CASES = [Case("multi", "public", op, s) for op, s in (
    ("unified_attention", "8"), ("fused_moe", "0"), ("moe_align_block_size", "0"),
    ("moe_count_and_sort", "0"), ("gated_delta_rule_update", "8"), ("mla_decode_attention", "0"))]


def probe(case: Case, public: Path, rounds: int) -> dict[str, Any]:
    from evaluation.harness.operator_files import import_file, make_inputs
    from evaluation.harness.release import load_release
    from evaluation.harness.timed_calls import FreshInputs
    from evaluation.harness.timing import L2Flusher, Sampler, TimingSettings, measure_forward
    from evaluation.harness.timing_host import persisting_l2_resetter

    forward, sets = load_case(case, public)
    op = load_release(public).operator(case.operator).public
    inputs_module = import_file(op.directory / "input.py", f"probe_inputs_{case.operator}")
    kwargs = dict(op.shape(case.shape).input_kwargs)
    fresh = FreshInputs(lambda seed: make_inputs(inputs_module, kwargs, seed,
                                                 torch.device("cuda")),
                        sets, list(range(len(sets))))
    sampler = Sampler(lambda i: forward(sets[i]), sets, L2Flusher("read"),
                       persisting_l2_resetter(), fresh.refill, None)
    flush = L2Flusher("read")
    times: dict[str, list[float]] = {"plain": [], "fresh": [], "harness": []}
    for inputs in sets:
        forward(inputs)
    for i in range(rounds):
        for kind in ("plain", "fresh", "harness"):
            index = i % len(sets)
            if kind == "harness":
                times[kind] += sampler.plain(1).walls
                continue
            if kind == "fresh":
                fresh.refill(index)
            flush()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            forward(sets[index])
            end.record()
            torch.cuda.synchronize()
            times[kind].append(start.elapsed_time(end) * 1e-3)
    report = measure_forward(forward, sets, TimingSettings(allow_graph=False), fresh.refill)
    wall = wall_time_s(report.to_dict())
    row: dict[str, Any] = {"case": case.label, "fresh_inputs": fresh.fresh,
                           "scored_s": report.median_s, "harness_wall_s": wall,
                           "span_s": report.span_median_s, "busy_s": report.busy_median_s}
    for kind, values in times.items():
        q = statistics.quantiles(values, n=10)
        row[kind] = {"median_s": statistics.median(values), "p10_s": q[0], "p90_s": q[-1]}
    print(f"{case.label:40} " + " ".join(f"{k} {row[k]['median_s'] * 1e6:8.1f}"
                                          for k in times)
          + f" | measure_forward {report.median_s * 1e6:8.1f} (E {wall * 1e6:8.1f}, "
            f"span {report.span_median_s * 1e6:8.1f}) fresh={fresh.fresh}", flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--public-release", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = [probe(case, args.public_release, args.rounds) for case in CASES]
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                         "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
