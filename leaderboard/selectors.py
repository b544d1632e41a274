"""Boards: the best ranked submission per team under one weight set, as plain rows."""

from __future__ import annotations

import csv
import io
import statistics
from typing import Any

from django.db import connection
from django.db.models import F
from django.http import Http404

from evaluation.models import HardwareProfile, Release
from leaderboard.models import SubmissionScore, WeightSet
from leaderboard.scoring import ShapeOutcome, solve_rate
from submissions.models import ShapeResult

NUMBER_COLUMNS = ("aggregate", "memory", "compute", "prefill", "decode", "unweighted_mean",
                  "correctness_rate", "dsl_adoption_rate")
COLUMNS = ("rank", "team", "submission", *NUMBER_COLUMNS, "output_tokens", "agent", "model",
           "date")


def weight_set_for(release: Release, version: str | None) -> WeightSet:
    sets = release.weight_sets.all()
    chosen = sets.filter(version=int(version)) if version and version.isdigit() else \
        sets.filter(active=True)
    weight_set = chosen.first()
    if weight_set is None:
        raise Http404("no such weight set")
    return weight_set


_BOARD_FIELDS = ("submission_id", "submission__team_id", "submission__team__name",
                 "submission__created_at", "submission__output_tokens", "submission__agent",
                 "submission__model_name", *NUMBER_COLUMNS)


def board_rows(*, release: Release, hardware: HardwareProfile, weight_set: WeightSet,
               all_submissions: bool = False, sort: str = "aggregate") -> list[dict[str, Any]]:
    scores = (SubmissionScore.objects
              .filter(weight_set=weight_set, ranked=True, submission__hardware=hardware,
                      submission__release=release, submission__team__hidden=False)
              .values(*_BOARD_FIELDS))  # plain rows: a board can hold 10,000 submissions
    if not all_submissions and connection.vendor == "postgresql":
        # The best submission per team, chosen by the database: one row per team comes back.
        scores = scores.order_by("submission__team_id", F("aggregate").desc(nulls_last=True),
                                 "submission__created_at").distinct("submission__team_id")
    ordered = sorted(scores, key=lambda s: (-(s["aggregate"] or 0.0), s["submission__created_at"]))
    rows: list[dict[str, Any]] = []
    seen: set[int] = set()
    for score in ordered:
        team = score["submission__team_id"]
        if not all_submissions and team in seen:
            continue
        seen.add(team)
        rows.append(_row(score, rank=len(rows) + 1))
    if sort in NUMBER_COLUMNS and sort != "aggregate":
        rows.sort(key=lambda r: -(r[sort] if r[sort] is not None else -1.0))
    return rows


def _row(score: dict[str, Any], rank: int) -> dict[str, Any]:
    return {
        "rank": rank, "team": score["submission__team__name"],
        "submission": score["submission_id"],
        **{column: score[column] for column in NUMBER_COLUMNS},
        "output_tokens": score["submission__output_tokens"], "agent": score["submission__agent"],
        "model": score["submission__model_name"],
        "date": score["submission__created_at"].date().isoformat(),
    }


def rows_as_csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row[k] is None else row[k]) for k in COLUMNS})
    return buffer.getvalue()


def operator_board(*, release: Release, hardware: HardwareProfile, weight_set: WeightSet,
                   operator: str) -> dict[str, Any]:
    """Best S_op per team, and the operator's difficulty across teams."""
    scores = (SubmissionScore.objects
              .filter(weight_set=weight_set, ranked=True, submission__hardware=hardware,
                      submission__release=release, submission__team__hidden=False,
                      submission__candidates__operator__name=operator)
              .select_related("submission__team"))
    best: dict[int, tuple[float, SubmissionScore]] = {}
    for score in scores:
        value = (score.by_operator or {}).get(operator)
        if value is None:
            continue
        team = score.submission.team_id
        if team not in best or value > best[team][0]:
            best[team] = (float(value), score)
    ordered = sorted(best.values(), key=lambda item: (-item[0], item[1].submission.created_at))
    rows = [{"rank": i + 1, "team": s.submission.team.name, "submission": s.submission.pk,
             "score": value, "date": s.submission.created_at.date().isoformat()}
            for i, (value, s) in enumerate(ordered)]
    values = [value for value, _ in ordered]
    return {
        "operator": operator, "rows": rows, "teams": len(values),
        "solve_rate": solve_rate(_operator_outcomes([s.submission_id for _, s in ordered],
                                                    operator)),
        "median_score": statistics.median(values) if values else None,
    }


def _operator_outcomes(submission_ids: list[int], operator: str) -> list[list[ShapeOutcome]]:
    """Per submission, its latest attempt's shapes of `operator` (for the solve rate)."""
    grouped: dict[int, list[ShapeOutcome]] = {pk: [] for pk in submission_ids}
    results = (ShapeResult.objects
               .filter(job__candidate__submission_id__in=submission_ids,
                       job__candidate__operator__name=operator, attempt=F("job__attempts"))
               .values_list("job__candidate__submission_id", "shape__shape_id", "status",
                            "verdict", "attainment"))
    for submission_id, shape_id, status, verdict, value in results:
        grouped[submission_id].append(ShapeOutcome(
            operator=operator, shape_id=shape_id, correct=status == "passed",
            verdict=verdict or None, attainment=value))
    return list(grouped.values())


def rank_changes(*, release: Release, hardware: HardwareProfile, before: WeightSet,
                 after: WeightSet) -> list[dict[str, Any]]:
    """Each team's rank and aggregate under two weight versions, biggest moves first."""
    old = {r["team"]: r for r in board_rows(release=release, hardware=hardware, weight_set=before)}
    new = {r["team"]: r for r in board_rows(release=release, hardware=hardware, weight_set=after)}
    rows = []
    for team in sorted(set(old) | set(new)):
        was, now = old.get(team), new.get(team)
        rows.append({
            "team": team, "rank_before": was and was["rank"], "rank_after": now and now["rank"],
            "aggregate_before": was and was["aggregate"], "aggregate_after": now and now["aggregate"],
            "move": (was["rank"] - now["rank"]) if was and now else None,
        })
    return sorted(rows, key=lambda r: (-abs(r["move"] or 0), r["rank_after"] or 10**9))
