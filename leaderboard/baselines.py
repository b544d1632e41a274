"""Unranked rows beside the boards: the newest evaluation of each reference baseline (PyTorch
eager and compiled, open libraries, the best open kernel per operator) and the release's own
production timings, on the aggregate, subset and operator boards. Built with the boards' row
helpers (leaderboard/selectors.py)."""

from __future__ import annotations

from typing import Any

from evaluation.catalog.models import HardwareProfile, Operator, Release
from evaluation.harness.roofline import attainment, roofline_point
from leaderboard.models import OperatorSummary, SubmissionScore, WeightSet
from leaderboard.scoring import ScoringPolicy, ShapeOutcome, combine, summarise
from leaderboard.selectors import (
    BOARD_FIELDS,
    NUMBER_COLUMNS,
    ON_BOARDS,
    RELEASE_FACTS_S,
    board_json_fields,
    board_row,
    decode_board_json,
    mark_no_interval,
    release_facts_key,
)
from portal import derived_cache
from submissions.models import Submission


def baseline_rows(*, release: Release, hardware: HardwareProfile, weight_set: WeightSet,
                  board: str = "aggregate") -> list[dict[str, Any]]:
    """Unranked rows beside the board: the newest evaluation of each reference baseline,
    and the release's own production timings where they were taken on this hardware. A
    baseline run in Triton's CPU interpreter timed nothing: it is no row of a GPU board.
    Each with the interval of `board`'s score, or badged "no interval"."""
    rows = []
    labels = dict(Submission.Baseline.choices)
    newest = (SubmissionScore.objects
              .filter(weight_set=weight_set, submission__hardware=hardware,
                      submission__release=release, interpreter_jobs=0, **ON_BOARDS)
              .exclude(submission__baseline="")
              .order_by("submission__baseline", "-submission__created_at")
              .values(*BOARD_FIELDS, "submission__baseline", **board_json_fields(board)))
    seen = set()
    for score in map(decode_board_json, newest):
        kind = score["submission__baseline"]
        key = (kind, score["submission__agent"] if kind == Submission.Baseline.LIBRARY else "")
        if key in seen:
            continue
        seen.add(key)
        row = board_row(score, rank=None)
        row["team"] = baseline_label(kind, score["submission__agent"], labels)
        # the reference, eager or compiled, has no DSL of the release; a library row its kernels
        row["dsl"] = "library" if kind in LIBRARY_BASELINES else "pytorch"
        row["badges"] = ["baseline"]
        row["interval"], row["ranked_by"] = score["interval"], board
        rows.append(row)
    production = production_baseline(release=release, hardware=hardware, weight_set=weight_set)
    if production is not None:
        # one production time per shape: no samples, no interval
        rows.append({**production, "interval": None, "ranked_by": board})
    for row in rows:
        mark_no_interval(row)
    return rows


LIBRARY_BASELINES = (Submission.Baseline.LIBRARY, Submission.Baseline.BEST_OPEN)


def baseline_label(kind: str, agent: str, labels: dict[str, str]) -> str:
    """A baseline row's name: a library's is its package and version."""
    if kind == Submission.Baseline.LIBRARY:
        return f"{agent} (open library)"
    return labels.get(kind, kind)


def production_baseline(*, release: Release, hardware: HardwareProfile,
                        weight_set: WeightSet) -> dict[str, Any] | None:
    """The release's production timings (metadata.json) scored like a submission.

    Only shapes timed on this hardware count, and the weights are renormalised over the
    operators that have such timings; the row says how much of the weight it covers.
    """
    outcomes, frameworks = _production_outcomes(release, hardware)
    covered = {o.operator for o in outcomes}
    weights = {op: w for op, w in weight_set.weights.items() if op in covered}
    if not any(weights.values()):
        return None
    score = combine(summarise(outcomes, ScoringPolicy(fallback_scores_zero=False)), weights)
    share = sum(weights.values())
    return {
        "rank": None, "team": f"Production ({', '.join(sorted(frameworks)) or 'timings'})",
        "submission": None, "dsl": "",
        **{c: getattr(score, c) for c in NUMBER_COLUMNS
           if c not in ("correctness_rate", "dsl_adoption_rate")},
        "correctness_rate": None, "dsl_adoption_rate": None, "output_tokens": None,
        "agent": "", "model": "", "date": "",
        "badges": ["baseline", f"{len(covered)} operators, {share:.0%} of the weight"],
        "environment": "production timings: " + ", ".join(sorted(frameworks)),
    }


def _production_outcomes(release: Release,
                         hardware: HardwareProfile) -> tuple[list[ShapeOutcome], set[str]]:
    """Kept in the cache per release and hardware profile's figures (a query per operator)."""
    outcomes, frameworks = derived_cache.remember(
        derived_cache.BOARDS, release_facts_key("production", release, hardware),
        lambda: _production_outcomes_read(release, hardware), RELEASE_FACTS_S)
    return list(outcomes), set(frameworks)


def _production_outcomes_read(release: Release,
                              hardware: HardwareProfile) -> tuple[list[ShapeOutcome], set[str]]:
    profile = hardware.as_spec()
    wanted = _sku(hardware.name)
    outcomes, frameworks = [], set()
    for op in Operator.objects.filter(release=release).select_related("hidden"):
        hidden = getattr(op, "hidden", None)
        if hidden is None:
            continue
        metadata = hidden.metadata or {}
        public = set(op.shapes.values_list("shape_id", flat=True))  # not the hidden tier
        for shape_id, meta in (metadata.get("shapes") or {}).items():
            if shape_id not in public:
                continue
            timings = (meta or {}).get("production_performance") or {}
            timing = next((t for sku, t in timings.items() if _sku(sku) == wanted), None)
            shape = hidden.shape_roofline(shape_id)
            # no time, or none a kernel could take (attainment's ValueError): no outcome
            if not timing or shape is None or not float(timing.get("performance_us") or 0) > 0:
                continue
            point = roofline_point(shape, profile)
            if timing.get("framework"):
                frameworks.add(str(timing["framework"]))
            measured = attainment(point.sol_s, float(timing["performance_us"]) * 1e-6,
                                  launch_floor_s=0.0)
            outcomes.append(ShapeOutcome(
                operator=op.name, shape_id=shape_id, correct=True, verdict="native",
                attainment=measured.attainment, regime=point.regime,
                phase=(meta or {}).get("phase") or metadata.get("phase")))
    return outcomes, frameworks


def _sku(name: str) -> str:
    """"H100 SXM", "h100_sxm" and "H100-SXM" name the same hardware."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def operator_baselines(*, release: Release, hardware: HardwareProfile, weight_set: WeightSet,
                       operator: str) -> list[dict[str, Any]]:
    """The newest evaluation of each reference baseline on `operator`: its S_op and share of
    correct shapes, unranked, beside the teams' rows (as on the aggregate board)."""
    labels = dict(Submission.Baseline.choices)
    newest = (SubmissionScore.objects
              .filter(weight_set=weight_set, submission__hardware=hardware,
                      submission__release=release, **ON_BOARDS,
                      submission__candidates__operator__name=operator)
              .exclude(submission__baseline="")
              .order_by("submission__baseline", "-submission__created_at")
              .select_related("submission"))
    chosen: dict[tuple[str, str], SubmissionScore] = {}
    for score in newest:
        kind = score.submission.baseline
        chosen.setdefault((kind, score.submission.agent if kind == Submission.Baseline.LIBRARY
                           else ""), score)
    correctness = dict(OperatorSummary.objects
                       .filter(operator__release=release, operator__name=operator,
                               submission_id__in=[s.submission_id for s in chosen.values()])
                       .values_list("submission_id", "correctness_rate"))
    return [{"team": baseline_label(kind, score.submission.agent, labels),
             "submission": score.submission_id,
             "score": (score.by_operator or {}).get(operator),
             "hidden_score": (score.hidden_by_operator or {}).get(operator),
             "correctness_rate": correctness.get(score.submission_id, 0.0),
             "date": score.submission.created_at.date().isoformat()}
            for (kind, _), score in chosen.items()]
