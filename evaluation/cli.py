"""Command line of the evaluator: `python -m evaluation evaluate ...`, `check-release ...`.

Exit codes: 0 when the evaluation ran (whatever the candidate scored) or the release check
found nothing, 1 when the release check found problems, 2 for bad arguments or a broken
release, 3 when the harness itself failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console

from .harness.dsl import KNOWN_DSLS
from .harness.evaluate import EvaluationSettings, apply_roofline
from .harness.isolation.sandbox import HarnessError, SandboxSettings
from .harness.release import (
    HardwareSpec,
    ReleaseError,
    load_release,
    project_hardware_profiles,
)
from .harness.release_check import ShapeOnDevice, check_on_device, check_release, device_findings
from .harness.timing import TimingSettings
from .local_evaluation import evaluate_with_progress, local_request, print_result, select_shapes

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_HARNESS = 0, 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluation",
                                     description="Atrex evaluator: compile, correctness, "
                                                 "fallback detection, timing, roofline.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("evaluate", help="evaluate one candidate on one operator")
    run.add_argument("--release", required=True, type=Path, help="Atrex-layout release folder")
    run.add_argument("--operator", required=True)
    run.add_argument("--candidate", required=True, type=Path, help="the candidate's .py file")
    run.add_argument("--hardware", default=None,
                     help="roofline profile (default: H200 when the release has hidden files)")
    run.add_argument("--shapes", default=None,
                     help="comma-separated shape ids or globs (default: all)")
    run.add_argument("--json", type=Path, default=None, help="write the result JSON here")
    run.add_argument("--dsl", default=None, choices=KNOWN_DSLS,
                     help="the candidate's DSL (default: the release's first accepted one)")
    run.add_argument("--device", choices=("cuda", "cpu"), default=None)
    run.add_argument("--trials", type=int, default=5)
    run.add_argument("--timeout", type=float, default=300.0,
                     help="seconds for compile + correctness of one shape")
    run.add_argument("--time-cap", type=float, default=1.0,
                     help="seconds of timing per shape at most")
    run.add_argument("--no-isolation", action="store_true",
                     help="run the child as this user, with network (debugging only)")
    commands.add_parser("demo", help="evaluate the fixture release's sample candidates "
                                     "(Triton and PyTorch) on its dev shapes")
    check = commands.add_parser(
        "check-release", help="check a release's files, input keys and SOL; with --device "
                              "cuda also run every shape's reference once on this GPU")
    check.add_argument("--release", required=True, type=Path, help="Atrex-layout release folder")
    check.add_argument("--device", choices=("cuda", "cpu"), default="cpu",
                       help="cuda: run every shape's reference on this GPU (memory, run or not)")
    check.add_argument("--operators", default=None, help="comma-separated (default: all)")
    check.add_argument("--json", type=Path, default=None,
                       help="write the device report here (for manage.py check_release "
                            "--device-report)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(stderr=True)
    try:
        if args.command == "demo":
            return _demo(console)
        if args.command == "check-release":
            return _check_release(args, console)
        return _evaluate(args, console)
    except ReleaseError as exc:
        console.print(f"[red]release error:[/] {exc}")
        return EXIT_USAGE
    except HarnessError as exc:
        console.print(f"[red]harness error:[/] {exc}")
        return EXIT_HARNESS


def _evaluate(args: argparse.Namespace, console: Console) -> int:
    release = load_release(args.release)
    operator = release.operator(args.operator)
    if not args.candidate.is_file():
        console.print(f"[red]no such candidate file:[/] {args.candidate}")
        return EXIT_USAGE
    try:
        shape_ids = select_shapes([s.id for s in operator.public.shapes], args.shapes)
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        return EXIT_USAGE
    hardware = _hardware(release.hardware, args.hardware, operator.roofline is not None)
    job = local_request(release, operator, args.candidate.read_text(encoding="utf-8"),
                        shape_ids, args.dsl or release.settings.dsl)
    settings = EvaluationSettings(
        trials=args.trials, compile_timeout_s=args.timeout, device=args.device,
        timing=TimingSettings(max_seconds=args.time_cap),
        sandbox=SandboxSettings(isolate=not args.no_isolation),
    )
    result = evaluate_with_progress(job, settings, console, mode="")  # verdicts as recorded
    if hardware is not None and operator.roofline is not None:
        apply_roofline(result, operator.roofline, hardware)
    print_result(result, Console())
    if args.json:
        args.json.write_text(result.to_json())
        console.print(f"result written to {args.json}")
    return EXIT_OK


def _demo(console: Console) -> int:
    """What `make run` shows until the portal exists: honest vs fallback candidates."""
    root = Path(__file__).resolve().parent
    release = root / "releases" / "atrex-fixture"
    candidates = root / "sample_candidates"
    for operator in sorted(load_release(release).operators):
        for candidate in ("triton_native", "torch_fallback"):
            console.rule(f"{operator}: {candidate}.py")
            code = _evaluate(build_parser().parse_args([
                "evaluate", "--release", str(release), "--operator", operator,
                "--candidate", str(candidates / operator / f"{candidate}.py"), "--shapes", "dev-*",
            ]), console)
            if code != EXIT_OK:
                return code
    return EXIT_OK


def _check_release(args: argparse.Namespace, console: Console) -> int:
    static = check_release(args.release, project_hardware_profiles())
    if static.release_error:
        console.print(f"[red]release error:[/] {static.release_error}")
        return EXIT_USAGE
    problems = [p for op in static.operators for p in op.problems]
    console.print(f"{len(static.operators)} operators, "
                  f"{sum(op.shapes for op in static.operators)} shapes: "
                  f"{len(problems)} problems in the files")
    for problem in problems:
        console.print(f"  problem: {problem}")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            console.print("[red]--device cuda: no GPU here[/]")
            return EXIT_USAGE
        names = [n.strip() for n in args.operators.split(",")] if args.operators else None

        def line(row: ShapeOnDevice) -> None:
            peak = f"{(row.peak_bytes or 0) / 1024**3:7.2f} GiB"
            took = f"{row.seconds * 1e3:9.2f} ms" if row.seconds is not None else "        -"
            console.print(f"  {row.operator:32} {row.shape_id:>40} {peak} {took} "
                          f"{row.error or 'runs'}")

        report = check_on_device(args.release, torch.device("cuda"), names, line)
        device_problems, warnings = device_findings(report)
        for warning in warnings:
            console.print(f"  warning: {warning}")
        for problem in device_problems:
            console.print(f"  problem: {problem}")
        runs = len(report.shapes) - len(report.cannot_run())
        console.print(f"on {report.device}: {runs} of {len(report.shapes)} shapes' references "
                      f"run, {len(warnings)} may not fit an evaluation")
        problems += device_problems
        if args.json:
            args.json.write_text(json.dumps(report.to_dict(), indent=1) + "\n")
            console.print(f"device report written to {args.json}")
    return EXIT_PROBLEMS if problems else EXIT_OK


def _hardware(profiles: Mapping[str, HardwareSpec], name: str | None,
              has_roofline: bool) -> HardwareSpec | None:
    if name is None and not has_roofline:
        return None
    available = {**project_hardware_profiles(), **profiles}
    name = name or "H200"
    if name not in available:
        raise ReleaseError("configs/hardware", name,
                           f"no such hardware profile (known: {', '.join(sorted(available))})")
    return available[name]


if __name__ == "__main__":
    sys.exit(main())
