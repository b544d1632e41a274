"""Scored time (the harness's profiler-record method) against ncu's gpu__time_duration.sum.

For single-kernel Triton candidates of the fixture release at real sizes, both with L2
flushed before every kernel (the harness flushes with its own kernel; ncu with
--cache-control all). Prints one row per shape and the relative difference.

Usage (on the GPU host): python benchmarks/ncu_compare.py [--launches 20]
"""

from __future__ import annotations

import argparse
import csv
import glob
import io
import shutil
import statistics
import subprocess
import sys

import torch
from _path import REPO

from evaluation.harness.operator_files import (
    candidate_model_class,
    import_file,
    make_inputs,
    make_model,
)
from evaluation.harness.release import load_release
from evaluation.harness.timing import TimingSettings, measure_forward

RELEASE = REPO / "evaluation" / "releases" / "atrex-fixture"
CANDIDATES = REPO / "evaluation" / "sample_candidates"
CASES = [
    ("rms_norm", "llama8b-prefill-t4096-h4096"),
    ("rms_norm", "llama8b-prefill-t16384-h4096"),
    ("rms_norm", "llama70b-prefill-t4096-h8192"),
    ("silu_and_mul", None),
    ("fused_add_rms_norm", None),
    ("gemm_fp16", None),
]
NVTX_RANGE = "atrex_timed"


def load(operator: str, shape_id: str) -> tuple[torch.nn.Module, object, dict[str, object]]:
    release = load_release(RELEASE)
    public = release.operator(operator).public
    spec = public.shape(shape_id)
    inputs_module = import_file(public.directory / "input.py", f"inputs_{operator}")
    candidate = import_file(CANDIDATES / operator / "triton_native.py", f"cand_{operator}")
    device = torch.device("cuda")
    model = make_model(candidate_model_class(candidate), spec.init_kwargs, 1, device)
    return model, inputs_module, dict(spec.input_kwargs)


def target(operator: str, shape_id: str, launches: int) -> None:
    """What ncu profiles: warm up outside the NVTX range, then `launches` forwards in it."""
    model, inputs_module, kwargs = load(operator, shape_id)
    inputs = make_inputs(inputs_module, kwargs, 7, torch.device("cuda"))  # type: ignore[arg-type]
    with torch.no_grad():
        model(**inputs)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(NVTX_RANGE)
        for _ in range(launches):
            model(**inputs)
            torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def sm_clock_mhz() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        return int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001 - the clock is a diagnostic only
        return None


def harness_time(operator: str, shape_id: str, flush: str) -> tuple[float, float, str, int | None]:
    model, inputs_module, kwargs = load(operator, shape_id)
    sets = [make_inputs(inputs_module, kwargs, seed, torch.device("cuda"))  # type: ignore[arg-type]
            for seed in range(4)]

    def forward(inputs: dict[str, torch.Tensor]) -> object:
        with torch.no_grad():
            return model(**inputs)

    settings = TimingSettings(max_seconds=2.0, flush=flush)
    report = measure_forward(forward, sets, settings)  # type: ignore[arg-type]
    clock = sm_clock_mhz()  # right after the sample loop: a throttled clock shows here
    assert report.median_s is not None and report.event_median_s is not None
    return report.median_s, report.event_median_s, report.method or "-", clock


def ncu_times(operator: str, shape_id: str, launches: int) -> list[float]:
    ncu = shutil.which("ncu") or next(iter(sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))),
                                      None)
    if ncu is None:
        raise SystemExit("ncu not found")
    command = [ncu, "--clock-control", "none", "--cache-control", "all", "--nvtx",
               "--nvtx-include", f"{NVTX_RANGE}/", "--metrics", "gpu__time_duration.sum",
               "--csv", "--print-units", "base", sys.executable, __file__, "--target",
               operator, shape_id, "--launches", str(launches)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300)
    rows = [r for r in csv.reader(io.StringIO(out.stdout[out.stdout.find('"ID"'):]))]
    if not rows:
        raise RuntimeError(f"ncu gave no CSV:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    header, body = rows[0], rows[1:]
    value, unit = header.index("Metric Value"), header.index("Metric Unit")
    scale = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3}
    return [float(r[value].replace(",", "")) * scale.get(r[unit], 1e-9) for r in body if r]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", nargs=2, metavar=("OPERATOR", "SHAPE"))
    parser.add_argument("--launches", type=int, default=20)
    args = parser.parse_args()
    if args.target:
        target(*args.target, args.launches)
        return 0
    release = load_release(RELEASE)
    print(f"{'operator':20} {'shape':36} {'ncu us':>9} {'write us':>9} {'diff':>7} "
          f"{'read us':>9} {'diff':>7} {'event us':>9} {'method':6} {'SM MHz':>6} {'ncu n':>5}")
    for operator, shape_id in CASES:
        shapes = [s.id for s in release.operator(operator).public.shapes
                  if not s.id.startswith("dev-")]
        for sid in ([shape_id] if shape_id else shapes[-2:]):
            ncu = statistics.median(ncu_times(operator, sid, args.launches))
            write, event, method, clock = harness_time(operator, sid, "write")
            read, _, _, _ = harness_time(operator, sid, "read")
            print(f"{operator:20} {sid:36} {ncu * 1e6:9.2f} {write * 1e6:9.2f} "
                  f"{(write - ncu) / ncu * 100:+6.1f}% {read * 1e6:9.2f} "
                  f"{(read - ncu) / ncu * 100:+6.1f}% {event * 1e6:9.2f} {method:6} "
                  f"{clock or '-':>6} {args.launches:5}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
