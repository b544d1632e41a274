"""`atrex evaluate-local`: the portal's public checks on the user's own machine.

A thin shell around the Django-free harness (evaluation/harness/): compile, correctness,
DSL adoption and, on a GPU, timing. It never applies a roofline: SOL and attainment need
the release's hidden files, which only the portal has. Without a GPU the harness runs
Triton's interpreter, like `python -m evaluation` and the portal's CPU workers.
"""

from __future__ import annotations

import ast
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from atrex_cli.client import EXIT_HARNESS, EXIT_REJECTED, CliError


@dataclass(frozen=True)
class LocalRun:
    release: Path
    operator: str
    candidate: Path
    shapes: str | None
    device: str | None
    trials: int
    timeout_s: float
    json_out: Path | None
    dsl: str | None = None  # None: the release's first accepted DSL


def evaluate_local(run: LocalRun, console: Console) -> bool:
    """Evaluate and print the table; True when every shape is correct and native."""
    # The harness imports torch and Triton: only this command pays for that.
    import torch

    from evaluation.harness.evaluate import EvaluationSettings
    from evaluation.harness.isolation.sandbox import HarnessError
    from evaluation.harness.release import ReleaseError, load_release
    from evaluation.harness.results import CPU_INTERPRETER, PASSED
    from evaluation.local_evaluation import evaluate_with_progress, local_request, print_result

    if not run.candidate.is_file():
        raise CliError(f"no such candidate file: {run.candidate}")
    source = checked_source(run.candidate)
    try:
        release = load_release(run.release)
        operator = release.operator(run.operator)
    except ReleaseError as exc:
        raise CliError(f"release error: {exc}") from None
    device = run.device or ("cuda" if torch.cuda.is_available() else "cpu")
    mode = CPU_INTERPRETER if device == "cpu" else "gpu"
    shape_ids = choose_shapes([s.id for s in operator.public.shapes], run.shapes, device)
    if run.shapes is None and len(shape_ids) < len(operator.public.shapes):
        console.print(f"no GPU: Triton's interpreter, on the {len(shape_ids)} dev shapes "
                      "(choose others with --shapes)")
    accepted = release.settings.accepted_dsls
    dsl = run.dsl or accepted[0]
    if dsl not in accepted:
        raise CliError(f"--dsl {dsl}: {release.root.name} accepts {', '.join(accepted)}")
    job = local_request(release, operator, source, shape_ids, dsl)
    tolerance = bundle_tolerance(run.release, run.operator)
    if tolerance is not None and operator.metadata is None:
        # A bundle has no metadata.json: the portal's own tolerance came in tolerances.json.
        from evaluation.harness.release import Tolerance

        job = dataclasses.replace(job, tolerance=Tolerance(**tolerance))
    console.print(f"tolerance: atol {job.tolerance.atol:g}, rtol {job.tolerance.rtol:g}"
                  + (" (the portal's, from the bundle)" if tolerance and operator.metadata is None
                     else " (from metadata.json)" if operator.metadata is not None
                     else " (the harness's default: no tolerances.json here)"))
    settings = EvaluationSettings(trials=run.trials, compile_timeout_s=run.timeout_s,
                                  device=device)
    try:
        result = evaluate_with_progress(job, settings, console, mode)
    except HarnessError as exc:
        raise CliError(f"harness error: {exc}", exit_code=EXIT_HARNESS) from None
    print_result(result, Console(markup=False, highlight=False))  # errors shown verbatim
    total = len(result.shapes)
    passed = sum(s.status == PASSED for s in result.shapes)
    native = sum(s.status == PASSED and s.verdict == "native" for s in result.shapes)
    if mode == CPU_INTERPRETER:
        console.print(f"{passed}/{total} shapes correct, {native}/{total} without torch work "
                      "the interpreter saw: unverified on CPU (code in the candidate's process "
                      "can hide torch work from that record; a GPU run sees device kernels)")
    else:
        console.print(f"{passed}/{total} shapes correct, {native}/{total} native (under the "
                      "default fallback policy only native shapes score); no SOL or attainment "
                      "here: the roofline is the portal's")
    if run.json_out is not None:
        run.json_out.write_text(result.to_json())
        console.print(f"result written to {run.json_out}")
    return native == total


def bundle_tolerance(release_dir: Path, operator: str) -> dict[str, float] | None:
    """The operator's tolerance in a bundle's tolerances.json (`atrex bundle` writes it:
    the portal's own atol and rtol), None without one."""
    path = release_dir / "tolerances.json"
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8")).get(operator)
        if found is None:
            return None
        return {"atol": float(found["atol"]), "rtol": float(found["rtol"])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CliError(f"{path}: cannot read the tolerances ({exc})") from None


def checked_source(path: Path) -> str:
    """The candidate's text, refused before the harness starts (and torch loads) when it is
    not UTF-8 or does not parse: the portal would refuse the same upload."""
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{path} is not UTF-8 text (byte {exc.start}); nothing was evaluated",
                       exit_code=EXIT_REJECTED) from None
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise CliError(f"{path}: syntax error on line {exc.lineno}: {exc.msg}; nothing was "
                       "evaluated", exit_code=EXIT_REJECTED) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        raise CliError(f"{path} cannot be compiled ({type(exc).__name__}); nothing was "
                       "evaluated", exit_code=EXIT_REJECTED) from None
    if not defines_model(ast.parse(source, str(path))):
        # the harness would start (seconds) only to find no model to build
        raise CliError(f"{path} defines no class Model (or ModelNew); nothing was evaluated",
                       exit_code=EXIT_REJECTED)
    return source


def defines_model(tree: ast.Module) -> bool:
    """A top-level `class Model` or `ModelNew` (or a name bound to one): the portal's rule
    for an upload (submissions/upload.py)."""
    names = ("Model", "ModelNew")
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in names:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names
                                                for t in node.targets):
            return True
    return False


def choose_shapes(all_ids: list[str], pattern: str | None, device: str) -> list[str]:
    """--shapes (comma-separated ids or globs); by default every shape on a GPU and the dev
    tier (`dev-*`, sized for the interpreter) on a CPU when the operator has one."""
    from evaluation.local_evaluation import select_shapes

    if pattern is None:
        dev = [s for s in all_ids if s.startswith("dev-")]
        return dev if device == "cpu" and dev else all_ids
    try:
        chosen = select_shapes(all_ids, pattern) if pattern else []
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if not chosen:
        raise CliError("--shapes selects no shape")
    return chosen
