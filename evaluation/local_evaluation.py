"""One candidate evaluated on this machine: what both command lines that do it share.

`python -m evaluation evaluate` (evaluation/cli.py) and `atrex evaluate-local`
(atrex_cli/local.py) pick the shapes, build the request, run the harness under a progress
bar and print the same table; each keeps its own arguments, defaults and messages.

Imports no Django (the `atrex` client imports it).
"""

from __future__ import annotations

import fnmatch

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .harness.evaluate import EvaluationRequest, EvaluationSettings, evaluate
from .harness.release import LoadedRelease, Operator
from .harness.results import PASSED, EvaluationResult, ShapeReport, shown_verdict


def select_shapes(all_ids: list[str], pattern: str | None) -> list[str]:
    """Comma-separated shape ids or globs, in the operator's order (every shape for none);
    ValueError for a part that matches nothing."""
    if not pattern:
        return all_ids
    chosen: list[str] = []
    for part in (p.strip() for p in pattern.split(",") if p.strip()):
        matches = [s for s in all_ids if fnmatch.fnmatchcase(s, part)]
        if not matches:
            raise ValueError(f"no shape matches {part!r} (shapes: {', '.join(all_ids)})")
        chosen += [m for m in matches if m not in chosen]
    return chosen


def local_request(release: LoadedRelease, operator: Operator, source: str,
                  shape_ids: list[str], dsl: str) -> EvaluationRequest:
    """The request for `source` on `operator`'s public shapes `shape_ids`; a release folder
    with hidden files is masked from the candidate."""
    return EvaluationRequest(
        operator=operator.public, candidate_source=source,
        tolerance=operator.tolerance, shape_ids=shape_ids, dsl=dsl,
        dsl_ratio_threshold=release.settings.dsl_ratio_threshold,
        masked_paths=(release.root,) if release.has_hidden_files else ())


def evaluate_with_progress(job: EvaluationRequest, settings: EvaluationSettings,
                           console: Console, mode: str) -> EvaluationResult:
    """Run the harness, a progress bar on `console` naming each shape's outcome as `mode`
    ("" for the verdict as recorded) shows it."""
    name = job.operator.name
    total = len(job.operator.shapes if job.shape_ids is None else job.shape_ids)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task(f"{name}: starting", total=total)

        def progress(shape: ShapeReport, done: int, total: int) -> None:
            bar.update(task, completed=done,
                       description=f"{name}: {shape.shape_id} {shape_state(shape, mode)}")

        return evaluate(job, settings, progress)


def shape_state(shape: ShapeReport, mode: str) -> str:
    if shape.status != PASSED:
        return f"failed at {shape.failed_stage}"
    return shown_verdict(shape.verdict, mode) or "correct"


def print_result(result: EvaluationResult, out: Console) -> None:
    """The result's table on stdout (`out`), one row per line in logs and pipes."""
    if not out.is_terminal:
        out.width = 160  # logs and pipes: keep each row on one line
    out.print(result_table(result))


def result_table(result: EvaluationResult) -> Table:
    table = Table(title=f"{result.operator} on {result.device} ({result.mode})")
    for column in ("shape", "status", "max error", "time", "SOL", "attainment", "verdict"):
        table.add_column(column)
    for shape in result.shapes:
        timing = shape.timing or {}
        roofline = shape.roofline or {}
        status = "passed" if shape.status == PASSED else f"failed ({shape.failed_stage})"
        table.add_row(
            shape.shape_id, status,
            "-" if shape.max_abs_error is None else f"{shape.max_abs_error:.3g}",
            # One convention with the portal and `atrex`: a correct shape without a time is
            # "not timed" (not 0); a failed one has no time to show.
            _microseconds(timing.get("median_s")) if timing.get("measured")
            else "not timed" if shape.status == PASSED else "-",
            _microseconds(roofline.get("sol_s")),
            "-" if roofline.get("attainment") is None else
            f"{roofline['attainment']:.3f}" + (" SUSPICIOUS" if roofline.get("suspicious") else ""),
            shown_verdict(shape.verdict, result.mode) or "-",
        )
    errors = [s for s in result.shapes if s.error]
    if errors:
        table.caption = "\n".join(f"{s.shape_id}: {s.error}" for s in errors)
    return table


def _microseconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e9:.1f} ns" if seconds < 1e-6 else f"{seconds * 1e6:.2f} µs"
