"""The Atrex paper's table for any release and hardware (its table 1), from stored results.

One row per team, or per agent and model where a team's submissions name them (the paper's
rows are agents): of each such group, its best complete, ranked submission on the aggregate
board. Columns, over the release's public shapes (a shape without a result counts as failed):

- compile %: shapes whose candidate compiled (imported, instantiated, first call ran);
- correct %: shapes that matched the reference;
- native %: shapes correct and native (the declared DSL did the work: the paper's share in
  the target DSL);
- S_agg: the board's score under the weights shown;
- vs torch.compile, vs best open kernel, vs production: per operator, the ratio of the
  baseline's summed times to the row's over the shapes both timed (above 1: the row is
  faster), then the median over the operators where both timed any shape, as the paper
  takes it. "best open kernel" is the ladder's row (leaderboard/ladder.py); "production"
  the release's production timings where it has them for this hardware (metadata.json),
  else none;
- output tokens: what the submission says its agent spent.

Per operator: the solve rate (the share of the table's rows correct and native on every
shape of it) and the memory- and compute-bound split (how many of its shapes the roofline
puts in each regime on this hardware; a balanced shape counts in both).
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import F

from evaluation.catalog.models import HardwareProfile, Operator, Release
from leaderboard.models import SubmissionScore, WeightSet
from leaderboard.outcomes import scoring_context
from leaderboard.scoring import BALANCED, COMPUTE, MEMORY
from leaderboard.selectors import ON_BOARDS, RANKABLE, best_first
from submissions.models import ShapeResult, Submission

# the last stage a shape passed (the harness sets "compile" once the first call returned)
COMPILED_STAGES = frozenset({"compile", "correctness", "adoption", "performance"})
ROW_COLUMNS = ("row", "team", "agent", "model", "submission", "compile_rate", "correct_rate",
               "native_rate", "aggregate", "vs_torch_compile", "vs_best_open", "vs_production",
               "output_tokens")
OPERATOR_COLUMNS = ("operator", "solve_rate", "memory_shapes", "compute_shapes", "shapes")
# times per (operator, shape id): what the speed columns compare
Times = Mapping[tuple[str, str], float]


def paper_table(*, release: Release, hardware: HardwareProfile,
                weight_set: WeightSet) -> dict[str, Any]:
    context = scoring_context(release)
    operators = list(Operator.objects.filter(release=release).order_by("name"))
    shapes = {op.name: list(op.shapes.values_list("shape_id", flat=True)) for op in operators}
    total = sum(len(ids) for ids in shapes.values())
    chosen = _best_per_row(release, hardware, weight_set)
    per_shape = _shape_results([s["submission_id"] for s in chosen.values()])
    references = {kind: _newest_baseline(release, hardware, kind)
                  for kind in (Submission.Baseline.TORCH_COMPILE, Submission.Baseline.BEST_OPEN)}
    reference_times = {kind: _times(_shape_results([pk])[pk]) if pk else {}
                       for kind, pk in references.items()}
    production = _production_times(release, hardware)
    rows = []
    for key, score in sorted(chosen.items(), key=lambda item: best_first(
            item[1]["aggregate"], item[1]["correctness_rate"], item[1]["submission__created_at"])):
        results = per_shape.get(score["submission_id"], {})
        times = _times(results)
        rows.append({
            "row": key, "team": score["submission__team__name"],
            "agent": score["submission__agent"], "model": score["submission__model_name"],
            "submission": score["submission_id"],
            "compile_rate": _share(sum(r["stage_reached"] in COMPILED_STAGES or r["status"] == "passed"
                                       for r in results.values()), total),
            "correct_rate": _share(sum(r["status"] == "passed" for r in results.values()), total),
            "native_rate": _share(sum(r["status"] == "passed" and r["verdict"] == "native"
                                      for r in results.values()), total),
            "aggregate": score["aggregate"],
            "vs_torch_compile": speedup(reference_times[Submission.Baseline.TORCH_COMPILE], times),
            "vs_best_open": speedup(reference_times[Submission.Baseline.BEST_OPEN], times),
            "vs_production": speedup(production, times) if production else None,
            "output_tokens": score["submission__output_tokens"],
        })
    per_operator = []
    for op in operators:
        regimes = [context.regime(op, shape_id, hardware) for shape_id in shapes[op.name]]
        solved = sum(
            bool(shapes[op.name]) and all(
                (r := per_shape.get(row["submission"], {}).get((op.name, s))) is not None
                and r["status"] == "passed" and r["verdict"] == "native" for s in shapes[op.name])
            for row in rows)
        per_operator.append({
            "operator": op.name, "solve_rate": _share(solved, len(rows)) if rows else None,
            "memory_shapes": sum(r in (MEMORY, BALANCED) for r in regimes),
            "compute_shapes": sum(r in (COMPUTE, BALANCED) for r in regimes),
            "shapes": len(regimes)})
    return {"release": str(release), "hardware": hardware.name,
            "weights_version": weight_set.version, "rows": rows, "operators": per_operator,
            "references": {"torch_compile": references[Submission.Baseline.TORCH_COMPILE],
                           "best_open": references[Submission.Baseline.BEST_OPEN],
                           "production": bool(production)}}


def speedup(reference: Times, times: Times) -> float | None:
    """Per operator Σ T_reference / Σ T_row over the shapes both timed, then the median over
    operators; None where no shape was timed by both."""
    ratios = []
    for operator in sorted({op for op, _ in times}):
        both = [key for key in times if key[0] == operator and key in reference]
        if both and sum(times[k] for k in both) > 0:
            ratios.append(sum(reference[k] for k in both) / sum(times[k] for k in both))
    return float(statistics.median(ratios)) if ratios else None


def rows_csv(table: Mapping[str, Any]) -> str:
    """The rows, then a blank line and the per-operator part."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(ROW_COLUMNS)
    for row in table["rows"]:
        writer.writerow([_cell(row[c]) for c in ROW_COLUMNS])
    writer.writerow([])
    writer.writerow(OPERATOR_COLUMNS)
    for row in table["operators"]:
        writer.writerow([_cell(row[c]) for c in OPERATOR_COLUMNS])
    return buffer.getvalue()


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(("=", "+", "-", "@", "\t", "\r")):
        return "'" + value  # a spreadsheet would run it as a formula
    return value


def _best_per_row(release: Release, hardware: HardwareProfile,
                  weight_set: WeightSet) -> dict[str, dict[str, Any]]:
    """Per team, or per agent and model where the submission names them, its best ranked
    submission on the aggregate board."""
    scores = (SubmissionScore.objects
              .filter(weight_set=weight_set, submission__hardware=hardware,
                      submission__release=release, submission__team__hidden=False,
                      submission__baseline="", **RANKABLE, **ON_BOARDS)
              .values("submission_id", "submission__team__name", "submission__agent",
                      "submission__model_name", "submission__output_tokens",
                      "submission__created_at", "aggregate", "correctness_rate"))
    best: dict[str, dict[str, Any]] = {}
    for score in scores:
        agent, model = score["submission__agent"], score["submission__model_name"]
        key = " / ".join(p for p in (agent, model) if p) or score["submission__team__name"]
        mine = best_first(score["aggregate"], score["correctness_rate"],
                          score["submission__created_at"])
        if key not in best or mine < best_first(best[key]["aggregate"],
                                                best[key]["correctness_rate"],
                                                best[key]["submission__created_at"]):
            best[key] = dict(score)
    return best


def _shape_results(submissions: Iterable[int]) -> dict[int, dict[tuple[str, str], dict[str, Any]]]:
    grouped: dict[int, dict[tuple[str, str], dict[str, Any]]] = {pk: {} for pk in submissions}
    rows = (ShapeResult.objects
            .filter(job__candidate__submission_id__in=list(grouped), attempt=F("job__attempts"))
            .values("job__candidate__submission_id", "shape__operator__name", "shape__shape_id",
                    "status", "stage_reached", "verdict", "median_s"))
    for row in rows:
        grouped[row["job__candidate__submission_id"]][
            (row["shape__operator__name"], row["shape__shape_id"])] = dict(row)
    return grouped


def _times(results: Mapping[tuple[str, str], Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    return {key: float(r["median_s"]) for key, r in results.items()
            if r["status"] == "passed" and r["median_s"]}


def _newest_baseline(release: Release, hardware: HardwareProfile, kind: str) -> int | None:
    return (Submission.objects.filter(release=release, hardware=hardware, baseline=kind)
            .order_by("-created_at").values_list("pk", flat=True).first())


def _production_times(release: Release, hardware: HardwareProfile) -> dict[tuple[str, str], float]:
    """The release's production timings on this hardware (metadata.json), per shape."""
    wanted = _sku(hardware.name)
    times = {}
    for op in Operator.objects.filter(release=release).select_related("hidden"):
        hidden = getattr(op, "hidden", None)
        for shape_id, meta in ((hidden.metadata or {}).get("shapes") or {}).items() \
                if hidden is not None else ():
            for sku, timing in ((meta or {}).get("production_performance") or {}).items():
                value = float((timing or {}).get("performance_us") or 0)
                if _sku(sku) == wanted and value > 0:
                    times[(op.name, shape_id)] = value * 1e-6
    return times


def _sku(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _share(count: int, total: int) -> float | None:
    return count / total if total else None
