"""Check the atrex-fixture release against the sample candidates (standalone: no harness).

For every operator and every `dev-` shape, for a few seeds: build inputs with the release's
input.py, run the reference on clones and every sample candidate, and check
|out - ref| <= atol + rtol * |ref| (integer outputs exactly). Expectations: `wrong.py` fails
on every dev shape, every other candidate passes, and every Triton dev call (triton_native,
wrong) takes under a second, so the CPU interpreter can run them in tests.

With --real, the production shapes are checked too, where their inputs fit under
--max-real-bytes: their input.py and reference run, and the pure-PyTorch fallback must
agree with the reference (on a GPU, pass --device cuda to run every candidate there).

CPU:  TRITON_INTERPRET=1 .venv/bin/python evaluation/release_tools/check_fixture_candidates.py
GPU:  python3 evaluation/release_tools/check_fixture_candidates.py --device cuda --real --all-candidates
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
DEFAULT_RELEASE = HERE.parent / "releases" / "atrex-fixture"
DEFAULT_CANDIDATES = HERE.parent / "sample_candidates"
TRITON_CANDIDATES = ("triton_native", "wrong")
EXPECTED_TO_FAIL = ("wrong",)
SLOW_ON_CPU = ("torch_compiled",)
# On a CPU, production shapes run only the fp32 PyTorch fallback: the interpreter, Inductor and
# CPU fp16 matmuls (minutes for one 4096^3 product) would take far too long.
CPU_REAL_CANDIDATES = ("torch_fallback",)
DEV_PREFIX = "dev-"
MAX_TRITON_DEV_CALL_S = 1.0

Outputs = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Verdict:
    passed: bool
    max_abs_error: float
    detail: str


@dataclass(frozen=True)
class Row:
    operator: str
    shape_id: str
    candidate: str
    passed: bool
    expected_pass: bool
    max_abs_error: float
    max_call_s: float
    detail: str
    bench_ms: float | None = None  # median device-side time (do_bench), with --bench

    @property
    def as_expected(self) -> bool:
        return self.passed == self.expected_pass


def load_module(path: Path, name: str) -> ModuleType:
    # @triton.jit reads its function's source, so candidates must come from real files.
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def as_outputs(value: Any) -> Outputs:
    if isinstance(value, torch.Tensor):
        return {"out": value}
    if isinstance(value, dict):
        return dict(value)
    raise TypeError(f"model returned {type(value).__name__}, not a tensor or dict of tensors")


def compare(out: Outputs, ref: Outputs, atol: float, rtol: float) -> Verdict:
    if set(out) != set(ref):
        return Verdict(False, math.inf, f"keys {sorted(out)} != {sorted(ref)}")
    worst = 0.0
    for key in sorted(ref):
        o, r = out[key], ref[key]
        if o.shape != r.shape or o.dtype != r.dtype:
            return Verdict(False, math.inf,
                           f"{key}: {tuple(o.shape)} {o.dtype} != {tuple(r.shape)} {r.dtype}")
        if not r.dtype.is_floating_point:
            mismatches = int((o != r).sum())
            if mismatches:
                return Verdict(False, math.inf, f"{key}: {mismatches} integer mismatches")
            continue
        o64, r64 = o.detach().cpu().double(), r.detach().cpu().double()
        if bool((~torch.isfinite(o64) & torch.isfinite(r64)).any()):
            return Verdict(False, math.inf, f"{key}: NaN/Inf where the reference is finite")
        diff = (o64 - r64).abs()
        worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
        outside = int((diff > atol + rtol * r64.abs()).sum())
        if outside:
            return Verdict(False, worst, f"{key}: {outside}/{diff.numel()} outside tolerance")
    return Verdict(True, worst, "")


def clone_inputs(inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: t.clone() for name, t in inputs.items()}


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_call(model: torch.nn.Module, inputs: Mapping[str, torch.Tensor],
               device: str) -> tuple[Outputs, float]:
    synchronize(device)
    start = time.perf_counter()
    out = as_outputs(model(**inputs))
    synchronize(device)
    return out, time.perf_counter() - start


def bench_ms(model: torch.nn.Module, inputs: Mapping[str, torch.Tensor]) -> float:
    """Median time of one forward, L2 flushed (a rough look; the harness measures properly)."""
    import triton.testing

    return float(triton.testing.do_bench(lambda: model(**inputs), return_mode="median"))


def candidate_files(directory: Path, skip: Iterable[str]) -> list[Path]:
    skipped = set(skip)
    return [p for p in sorted(directory.glob("*.py")) if p.stem not in skipped]


def input_bytes(inputs_spec: Mapping[str, Any], make_inputs: Any) -> int:
    # Build on the meta device: the size of real inputs without allocating them.
    with torch.device("meta"):
        inputs = make_inputs(**inputs_spec)
    return sum(t.numel() * t.element_size() for t in inputs.values())


def check_shape(operator: str, shape_id: str, spec: Mapping[str, Any], reference: ModuleType,
                make_inputs: Any, candidates: list[Path], tolerance: Mapping[str, float],
                seeds: list[int], device: str, bench: bool) -> list[Row]:
    init = spec.get("init_kwargs") or {}
    atol, rtol = tolerance["atol"], tolerance["rtol"]
    ref_model = reference.Model(**init)
    rows = []
    for path in candidates:
        model = load_module(path, f"candidate_{operator}_{path.stem}").Model(**init)
        verdicts, call_times = [], []
        for seed in seeds:
            torch.manual_seed(seed)
            inputs = make_inputs(**spec["input_kwargs"])
            ref = as_outputs(ref_model(**clone_inputs(inputs)))
            out, elapsed = timed_call(model, clone_inputs(inputs), device)
            verdicts.append(compare(out, ref, atol, rtol))
            call_times.append(elapsed)
        failed = [v for v in verdicts if not v.passed]
        timed = bench and not failed and not shape_id.startswith(DEV_PREFIX)
        rows.append(Row(
            operator=operator, shape_id=shape_id, candidate=path.stem,
            passed=not failed, expected_pass=path.stem not in EXPECTED_TO_FAIL,
            max_abs_error=max(v.max_abs_error for v in verdicts),
            max_call_s=max(call_times),
            detail=failed[0].detail if failed else "",
            bench_ms=bench_ms(model, inputs) if timed else None,
        ))
    return rows


def check_operator(op_dir: Path, candidates_dir: Path, args: argparse.Namespace) -> list[Row]:
    operator = op_dir.name
    reference = load_module(op_dir / "reference.py", f"reference_{operator}")
    make_inputs = load_module(op_dir / "input.py", f"input_{operator}")._make_inputs
    shapes = json.loads((op_dir / "shapes.json").read_text())
    roofline = json.loads((op_dir / "roofline.json").read_text())["shapes"]
    metadata = json.loads((op_dir / "metadata.json").read_text())
    tolerance = {"atol": 1e-2, "rtol": 5e-2, **metadata.get("tolerance", {})}
    skip = [] if args.all_candidates else list(SLOW_ON_CPU) if args.skip_compiled else []
    all_candidates = candidate_files(candidates_dir / operator, skip)
    rows = []
    for shape_id, spec in shapes.items():
        candidates = all_candidates
        if not shape_id.startswith(DEV_PREFIX):
            if not args.real:
                continue
            size = input_bytes(spec["input_kwargs"], make_inputs)
            if size > args.max_real_bytes:
                print(f"  skip {operator}/{shape_id}: inputs {size / 2**20:.0f} MiB")
                continue
            if not args.device.startswith("cuda"):
                candidates = [p for p in all_candidates if p.stem in CPU_REAL_CANDIDATES]
        rows += check_shape(operator, shape_id, spec, reference, make_inputs, candidates,
                            tolerance, args.seeds, args.device, args.bench)
        sol_ms = roofline.get(shape_id, {}).get("SOL_time_ms", {}).get(args.sku)
        for row in rows[-len(candidates):]:
            print(format_row(row, sol_ms), flush=True)
    return rows


def format_row(row: Row, sol_ms: float | None) -> str:
    verdict = "PASS" if row.passed else "FAIL"
    flag = "" if row.as_expected else "  <-- UNEXPECTED"
    timing = ""
    if row.bench_ms is not None:
        timing = f"  bench={row.bench_ms * 1e3:9.1f} us"
        if sol_ms:
            timing += f" SOL={sol_ms * 1e3:8.2f} us ({sol_ms / row.bench_ms:6.1%})"
    return (f"  {row.operator:20s} {row.shape_id:42s} {row.candidate:15s} {verdict}  "
            f"max_abs={row.max_abs_error:9.3g}  call={row.max_call_s * 1e3:8.1f} ms"
            f"{timing}{'  ' + row.detail if row.detail else ''}{flag}")


def problems(rows: list[Row], device: str) -> list[str]:
    found = [f"{r.operator}/{r.shape_id}/{r.candidate}: expected "
             f"{'PASS' if r.expected_pass else 'FAIL'}" for r in rows if not r.as_expected]
    if not device.startswith("cuda"):
        found += [f"{r.operator}/{r.shape_id}/{r.candidate}: Triton dev call took "
                  f"{r.max_call_s:.2f} s" for r in rows
                  if r.candidate in TRITON_CANDIDATES and r.shape_id.startswith(DEV_PREFIX)
                  and r.max_call_s >= MAX_TRITON_DEV_CALL_S]
    return found


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", type=Path, default=DEFAULT_RELEASE)
    parser.add_argument("--candidates", type=Path, default=DEFAULT_CANDIDATES)
    parser.add_argument("--operator", action="append", help="only these operators")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--skip-compiled", action="store_true",
                        help="skip torch_compiled candidates (slow to compile on a CPU)")
    parser.add_argument("--all-candidates", action="store_true",
                        help="run every candidate, torch_compiled included")
    parser.add_argument("--real", action="store_true", help="also check production shapes")
    parser.add_argument("--max-real-bytes", type=int, default=256 * 2**20)
    parser.add_argument("--device", default="cpu", help="default device for inputs (cpu, cuda)")
    parser.add_argument("--bench", action="store_true",
                        help="GPU only: time passing candidates on production shapes")
    parser.add_argument("--sku", default="H200", help="roofline SKU to compare --bench with")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    torch.set_default_device(args.device)
    rows: list[Row] = []
    for op_dir in sorted(p for p in (args.release / "data").iterdir() if p.is_dir()):
        if args.operator and op_dir.name not in args.operator:
            continue
        print(op_dir.name, flush=True)
        rows += check_operator(op_dir, args.candidates, args)
    found = problems(rows, args.device)
    print(f"\n{len(rows)} checks, {sum(r.as_expected for r in rows)} as expected, "
          f"{len(found)} problems")
    for problem in found:
        print(f"PROBLEM {problem}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
