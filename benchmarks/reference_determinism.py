"""Are a release's inputs and references bitwise reproducible on this device?

The evaluator draws a shape's inputs twice from one secret seed (in the sandboxed child for
the candidate, in the trusted parent for the reference) and compares the two outputs within
the release's tolerance. That is only fair if `_make_inputs(seed)` gives the same tensors
every time and the reference is deterministic, or if the tolerance covers what varies. A
release with atol = rtol = 0 and a nondeterministic reference fails honest kernels at random.

For every shape and seed this script draws the inputs twice and compares them bitwise, then
runs the reference on each draw, the second time into memory filled with the child's poison
byte (as the child runs a candidate), and compares those outputs bitwise and within the
release tolerance. It prints one line per operator and every difference it finds.

Usage: python benchmarks/reference_determinism.py [--release DIR] [--operators a,b]
           [--seeds N] [--extra-seeds OP:SHAPE:N ...] [--dev] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch
from _path import REPO

from evaluation.harness.compare import as_output_dict, compare_outputs
from evaluation.harness.isolation.child_core import poison
from evaluation.harness.operator_files import (
    candidate_model_class,
    import_file,
    make_inputs,
    make_model,
)
from evaluation.harness.release import load_release


def first_difference(a: torch.Tensor, b: torch.Tensor) -> str:
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype}"
    differ = (a != b) & ~(torch.isnan(a) & torch.isnan(b)) if a.is_floating_point() else a != b
    count = int(differ.sum())
    where = differ.nonzero()[0].tolist()
    return (f"{count} of {a.numel()} elements differ, first at {where}: "
            f"{a[tuple(where)].item()!r} vs {b[tuple(where)].item()!r}")


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool((a == b).all())


def check_shape(op: Any, shape: Any, seeds: range, device: torch.device) -> list[str]:
    public = op.public
    inputs_module = import_file(public.directory / "input.py", f"_probe_inputs_{op.name}")
    reference = import_file(public.directory / "reference.py", f"_probe_ref_{op.name}")
    model = make_model(candidate_model_class(reference), shape.init_kwargs or {}, 1234, device)
    problems: list[str] = []
    for seed in seeds:
        first = make_inputs(inputs_module, shape.input_kwargs, seed, device)
        second = make_inputs(inputs_module, shape.input_kwargs, seed, device)
        for key, value in first.items():
            if isinstance(value, torch.Tensor) and not bitwise_equal(value, second[key]):
                problems.append(f"{shape.id} seed {seed}: input '{key}' differs between draws: "
                                f"{first_difference(value, second[key])}")
        with torch.no_grad():
            expected = as_output_dict(model(**first))
            nbytes = sum(v.numel() * v.element_size() for v in first.values()
                         if isinstance(v, torch.Tensor))
            poison(device, max(2 * nbytes, 1 << 20))
            got = as_output_dict(model(**second))
        assert expected is not None and got is not None
        for key, value in expected.items():
            if not bitwise_equal(value, got[key]):
                problems.append(f"{shape.id} seed {seed}: output '{key}' differs between runs: "
                                f"{first_difference(value, got[key])}")
        tol = op.tolerance
        comparison = compare_outputs(got, expected, tol.atol, tol.rtol)
        if not comparison.passed:
            problems.append(f"{shape.id} seed {seed}: the reference fails against itself "
                            f"within the release tolerance: {comparison.message}")
        del first, second, expected, got
    return problems


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", type=Path,
                        default=REPO / "evaluation" / "releases" / "atrex-starter")
    parser.add_argument("--operators", default="", help="comma-separated; default all")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per shape")
    parser.add_argument("--extra-seeds", action="append", default=[],
                        help="OPERATOR:SHAPE:N, more seeds for one shape")
    parser.add_argument("--dev", action="store_true", help="the dev tier only (CPU smoke test)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    release = load_release(args.release)
    wanted = set(filter(None, args.operators.split(",")))
    extra = {tuple(item.split(":")[:2]): int(item.split(":")[2]) for item in args.extra_seeds}
    report: dict[str, Any] = {"device": str(torch.cuda.get_device_name() if device.type == "cuda"
                                            else "cpu"), "torch": torch.__version__,
                              "operators": {}}
    for name, op in sorted(release.operators.items()):
        if wanted and name not in wanted:
            continue
        started = time.perf_counter()
        problems: list[str] = []
        shapes = [s for s in op.public.shapes if s.id.startswith("dev-") == args.dev]
        for shape in shapes:
            count = extra.get((name, shape.id), args.seeds)
            try:
                problems += check_shape(op, shape, range(count), device)
            except Exception as exc:  # noqa: BLE001 (a broken shape is a finding, go on)
                problems.append(f"{shape.id}: {type(exc).__name__}: {exc}")
            if device.type == "cuda":
                torch.cuda.empty_cache()
        report["operators"][name] = {"shapes": len(shapes), "problems": problems,
                                     "seconds": time.perf_counter() - started}
        print(f"{name:28} {len(shapes):3} shapes  {len(problems)} problems  "
              f"{time.perf_counter() - started:6.1f} s", flush=True)
        for problem in problems:
            print(f"    {problem}", flush=True)
        if args.json:
            args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
