"""Boards: the best ranked submission per team under one weight set, as plain rows."""

from __future__ import annotations

import bisect
import hashlib
import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson
from django.core.cache import cache
from django.db import connection
from django.db.models import (
    BooleanField,
    Count,
    F,
    Func,
    Min,
    OuterRef,
    QuerySet,
    Subquery,
    TextField,
    Value,
)
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Cast, Coalesce

from evaluation.catalog.models import HardwareProfile, Operator, Release
from evaluation.catalog.selectors import hidden_shape_counts
from evaluation.harness.dsl import DSL_LABELS
from leaderboard import tiers
from leaderboard.models import (
    BoardFreeze,
    BoardRecorded,
    BoardTally,
    OperatorSummary,
    ScoreSummary,
    SubmissionScore,
    WeightSet,
)
from leaderboard.outcomes import scoring_context
from leaderboard.scoring import (
    INTERVAL_Z,
    generalisation_reason_text,
)
from portal import derived_cache
from portal.accounts.models import Team
from submissions.models import Candidate, Submission

NUMBER_COLUMNS = ("aggregate", "memory", "compute", "prefill", "decode", "unweighted_mean",
                  "correctness_rate", "dsl_adoption_rate")
COLUMNS = ("rank", "team", "submission", "dsl", *NUMBER_COLUMNS, "output_tokens", "agent",
           "model", "date", "badges")
# What the page's headers say (the exports keep the keys above, which the legend explains).
COLUMN_LABELS = {
    "rank": "Rank", "team": "Team", "submission": "Sub\u00admission", "dsl": "DSL",
    "aggregate": "S_agg", "memory": "Memory-bound", "compute": "Compute-bound",
    "prefill": "Prefill", "decode": "Decode", "unweighted_mean": "Mean S_op, un\u00adweighted",
    "correctness_rate": "Correct shapes", "dsl_adoption_rate": "Native shapes",
    "output_tokens": "Output to\u00adkens", "agent": "Agent", "model": "Model", "date": "Date",
    "badges": "Notes"}
# The exports also give the board's own score's 95% interval and what each row was measured
# with (the page names it above the table).
# The boards of one release and hardware: each ranks teams by one of the stored scores.
BOARDS = {"aggregate": "Aggregate (S_agg)", "memory": "Memory-bound shapes",
          "compute": "Compute-bound shapes", "prefill": "Prefill operators",
          "decode": "Decode operators"}


def weight_set_for(release: Release, version: str | None) -> WeightSet | None:
    """Version `version` of the release's weights (digits), else the active set; None when
    there is no such version (or none active)."""
    sets = release.weight_sets.all()
    if not version or not (version.isascii() and version.isdigit()):
        return sets.filter(active=True).first()
    # more digits than a version column holds is no version (and would overflow the driver)
    return sets.filter(version=int(version)).first() if len(version) <= 9 else None


def board_freeze(release: Release, hardware: HardwareProfile) -> BoardFreeze | None:
    return (BoardFreeze.objects.filter(release=release, hardware=hardware)
            .select_related("frozen_by").first())


BOARD_FIELDS = ("submission_id", "submission__team_id", "submission__team__name",
                "submission__created_at", "submission__output_tokens", "submission__agent",
                "submission__model_name", "ranked", "complete", "unevaluated_shapes", "lost_jobs",
                "interpreter_jobs", "mixed_shapes", "fallback_shapes", "submission__environment",
                "generalisation_note", "excluded", "submission__ranking_excluded_reason",
                "library_shapes", "tier", *NUMBER_COLUMNS)
# The JSON columns a board row reads, fetched as text and decoded by orjson
# (`decode_board_json`): Django's JSONField decodes with the standard library's json.
BOARD_JSON_FIELDS = ("not_generalising",)
# What a board ranks: whole evaluations, none quarantined, measured on the hardware (a run in
# Triton's CPU interpreter is a check of correctness and adoption, with no time to rank).
RANKABLE = {"ranked": True, "complete": True, "interpreter_jobs": 0, "excluded": False}
# What a board, an export, the analysis or a baseline row may show at all: no check
# submission (evaluated for its team only), not even in "all submissions".
ON_BOARDS = {"submission__mode": Submission.Mode.RANKED}
# The shape subsets a board of that name covers (the aggregate board covers every shape).
SUBSET_BOARDS = ("memory", "compute", "prefill", "decode")


def best_first(value: float | None, correctness: float, created: datetime) -> tuple[float, ...]:
    """One rule for a team's best submission on every board, its own S_op board included:
    the higher score; on a tie, the higher correctness rate; then the newer submission.

    "Not timed" (None: a correct native shape without a GPU time) is not 0: it ranks below
    every measured positive score and above a 0, which is a measured failure or a fallback.
    """
    return (-(value or 0.0), value is not None, -correctness, -created.timestamp())


def ranked_order(value: float | None, correctness: float, created: datetime) -> tuple[float, ...]:
    """Teams on a board: the same, except that of two equal teams the earlier one leads."""
    return (-(value or 0.0), value is not None, -correctness, created.timestamp())


def board_rows(*, release: Release, hardware: HardwareProfile, weight_set: WeightSet,
               all_submissions: bool = False, sort: str = "aggregate",
               board: str = "aggregate", dsl: str | None = None,
               tier: str | None = None) -> list[dict[str, Any]]:
    """Ranked rows of one board: each team's best submission by the board's score
    (`best_first`), among its whole evaluations (every job ended). With `dsl`, only
    submissions with a file in that DSL (each team's best among them); with `tier`, only
    submissions within that tier (leaderboard/tiers.py: their narrowest tier is it or a
    narrower one), ranked among themselves.

    With `all_submissions`, every submission is a row, quarantined, still evaluating and
    interpreter-checked ones too (unranked, badged); never a check submission. A frozen
    board leaves out submissions made after it was frozen.
    """
    if board not in BOARDS:
        raise ValueError(f"no board named {board!r}: {', '.join(BOARDS)}")
    if board in SUBSET_BOARDS and not board_has_shapes(release, hardware, board):
        return []  # no shape of the release falls in this board's subset on this hardware
    scores = (SubmissionScore.objects
              .filter(weight_set=weight_set, submission__hardware=hardware,
                      submission__release=release, submission__team__hidden=False,
                      submission__baseline="", **ON_BOARDS)
              # plain rows (a board can hold 100,000 submissions), each with the board's
              # own interval only (the stored intervals hold every operator's too)
              .values(*BOARD_FIELDS, **board_json_fields(board)))
    freeze = board_freeze(release, hardware)
    if freeze is not None:
        scores = scores.filter(submission__created_at__lte=freeze.frozen_at)
    if dsl is not None:
        scores = scores.filter(submission_id__in=Candidate.objects.filter(dsl=dsl)
                               .values("submission_id"))
    if tier is not None:
        scores = scores.filter(tier__in=tiers.within(tier))
    if not all_submissions:
        scores = scores.filter(**RANKABLE)
        if connection.vendor == "postgresql":
            # The best submission per team (best_first), chosen by the database: one index
            # probe per shown team (the board_best_* index of the board's score), whatever
            # the number of submissions; one row per team comes back.
            scores = scores.filter(best_per_team(
                scores.filter(weight_set=weight_set, hardware=hardware), board,
                "correctness_rate", "created_at"))
    best: dict[int, dict[str, Any]] = {}
    for score in map(decode_board_json, scores):
        team = score["submission__team_id"]
        key = best_first(score[board], score["correctness_rate"], score["submission__created_at"])
        if all_submissions or team not in best or key < best_first(
                best[team][board], best[team]["correctness_rate"],
                best[team]["submission__created_at"]):
            best[score["submission_id"] if all_submissions else team] = score
    ordered = sorted(best.values(), key=lambda s: (
        not _rankable(s),
        *ranked_order(s[board], s["correctness_rate"], s["submission__created_at"])))
    rows = [board_row(score, rank=None) for score in ordered]
    for row, score in zip(rows, ordered, strict=True):
        row["interval"], row["ranked_by"] = score["interval"], board
        mark_no_interval(row)
    assign_ranks([row for row, score in zip(rows, ordered, strict=True) if _rankable(score)])
    if sort in NUMBER_COLUMNS and sort != board:
        rows.sort(key=lambda r: -(r[sort] if r[sort] is not None else -1.0))
    labels = dsl_labels({s["submission_id"]: s["submission__created_at"] for s in ordered})
    for row in rows:
        row["dsl"] = labels.get(row["submission"], "")
    return rows


def board_json_fields(board: str) -> dict[str, Cast]:
    """`.values()` keywords for a board row's JSON columns as text, under aliases of their
    own (`decode_board_json` decodes them into the fields' names), with the board's own
    interval only (the stored intervals hold every operator's too)."""
    fields = {JSON_ALIAS + name: Cast(name, TextField()) for name in BOARD_JSON_FIELDS}
    fields["interval"] = Cast(KeyTransform(board, "intervals"), TextField())
    return fields


JSON_ALIAS = "json_text_"  # a row's JSON column as text (no annotation may take a field's name)


def decode_board_json(score: dict[str, Any]) -> dict[str, Any]:
    for name in BOARD_JSON_FIELDS:
        text = score.pop(JSON_ALIAS + name)
        score[name] = orjson.loads(text) if text is not None else None
    if score["interval"] is not None:
        score["interval"] = orjson.loads(score["interval"])
    return score


def best_per_team(rows: QuerySet[Any, Any], score: str, correctness: str,
                  created: str) -> AmongPrimaryKeys:
    """A filter keeping each shown team's best row among `rows` (a query over a table with
    a `team` column), best by `best_first` over the named columns (PostgreSQL).

    A correlated subquery per team, which an index on (..., team, COALESCE(score, 0) DESC,
    score NULLS FIRST, correctness DESC, created DESC) answers with one probe, gathered into
    an array the row query matches its keys against: PostgreSQL runs the subquery once (an
    InitPlan), then reads the chosen rows by key. Joined as `IN (subquery)` instead the
    planner read every row of the table; sent as a list of 1,000 keys, the query took a
    second round trip and 10 ms more to build and plan."""
    best = (rows.filter(team_id=OuterRef("pk"))
            .order_by(Coalesce(F(score), Value(0.0)).desc(), F(score).asc(nulls_first=True),
                      F(correctness).desc(), F(created).desc())
            .values("pk")[:1])
    return AmongPrimaryKeys(F("pk"), Subquery(Team.objects.filter(hidden=False)
                                               .annotate(best=Subquery(best)).values("best")))


class AmongPrimaryKeys(Func):
    """`pk = ANY(ARRAY(subquery))`, a condition for `.filter()` (PostgreSQL only)."""

    arg_joiner = " = ANY(ARRAY"
    template = "(%(expressions)s))"
    output_field = BooleanField()


def assign_ranks(rows: list[dict[str, Any]]) -> None:
    """Ranks for rows in board order (best first), each with its score's 95% "interval".

    A row's rank is 1 + the rows above it that are clearly better: those whose score is
    above its own by more than a two-sample test at the intervals' level allows,
    a - b > z * sqrt(se_a^2 + se_b^2) (`clearly_better`), each se read back from its row's
    interval. Rows that pass no such test share a rank; adjacent rows with one rank are
    badged "tie". Ranks never go down the board (no row ranks better than one above it).
    A row without an interval (results recorded without timing samples) ranks by position,
    and every row below it counts it as better."""
    known: list[tuple[float, float]] = []  # (score, se) of the rows above with an interval
    previous, widest = 0, 0.0
    hypot = math.hypot
    for position, row in enumerate(rows):
        measured = _score_and_error(row)
        not_better = 0
        if measured is not None:
            score, error = measured
            # rows above score at least as high; only those within reach of the test can
            # fail to be clearly better: below score + z * hypot(widest se, min(this se,
            # widest se)), the test's bound for any row above (both its terms grow with the
            # higher row's se). `not clearly_better(higher, measured)` is written out, on
            # squares: a board of 1,000 rows makes some 50,000 of these tests per uncached
            # request.
            reach = score + INTERVAL_Z * hypot(widest, min(error, widest))
            for higher, higher_error in known[:bisect.bisect_right(known, (reach, math.inf))]:
                gap = higher - score
                lower_error = error if error < higher_error else higher_error  # min(), inline
                if gap <= 0 or gap * gap <= Z_SQUARED * (higher_error * higher_error
                                                         + lower_error * lower_error):
                    not_better += 1
            bisect.insort(known, measured)
            widest = max(widest, error)
        rank = max(previous, 1 + position - not_better)
        row["rank"] = previous = rank
    for above, below in itertools.pairwise(rows):
        if above["rank"] == below["rank"]:
            for row in (above, below):
                if "tie" not in row["badges"]:
                    row["badges"].append("tie")


Z_SQUARED = INTERVAL_Z * INTERVAL_Z
NO_INTERVAL = "no interval"


def mark_no_interval(row: dict[str, Any]) -> None:
    """A measured score without an interval says so, never silently: its results carry no
    timing samples (recorded elsewhere, or stored before 2026-12-03), so nothing can say how
    far it could move, and it ranks by position."""
    if row.get("interval") is None and row.get(row.get("ranked_by") or "aggregate") is not None \
            and NO_INTERVAL not in row["badges"]:
        row["badges"].append(NO_INTERVAL)


def clearly_better(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether score a = (score, se) is above b by more than chance: a two-sided test of the
    difference of two medians at the intervals' level (95%, z = 1.96). Overlapping
    intervals, the rule before 2026-12-04, tied up to a gap of z * (se_a + se_b), about
    1.4x looser where the errors are alike.

    The lower row's error counts only up to the higher row's: errors come from the timing
    samples a candidate's own process reports, and samples spread on purpose around the
    right median (half at 0.5x, half at 1.5x) give an error of 46% of the score. Uncapped,
    such a row would share the rank of every row above it that it could not beat. A row
    gains nothing from spreading its own samples; a higher row's honest uncertainty still
    ties the rows below it. Where the errors are alike (two evaluations of one kernel) the
    test is the same as before; in attainment the slower of two rows has the smaller error."""
    return a[0] - b[0] > INTERVAL_Z * math.hypot(a[1], min(b[1], a[1]))


def _score_and_error(row: dict[str, Any]) -> tuple[float, float] | None:
    """A row's ranked score and its standard error, read back from its 95% interval
    (score + z * se above; the low end may be cut at 0)."""
    interval = row.get("interval")
    if interval is None:
        return None
    score = row.get(row.get("ranked_by") or "aggregate")
    if score is None:
        score = (interval[0] + interval[1]) / 2
    return float(score), max(0.0, (float(interval[1]) - float(score)) / INTERVAL_Z)


DSL_LABEL_S = 7 * 86400  # a submission's files and their declared DSLs never change


def dsl_labels(submissions: Mapping[int, datetime]) -> dict[int, str]:
    """Each submission's DSL as a board shows it: one name, or each file's where they mix;
    `submissions`: each one's id and when it was made.

    Kept in the cache per submission, outside the boards' generations: a finished job
    drops a board, never changes a label (the files and their DSLs are fixed at upload), and
    reading 1,000 submissions' files again took a tenth of an uncached board. The key holds
    the submission's time as well as its id: a database restored or flushed under a kept
    cache gives ids out again, never with the same time."""
    keys = {submission: f"dsl-label:v1:{submission}:{created.timestamp()}"
            for submission, created in submissions.items()}
    found = cache.get_many(list(keys.values()))
    labels = {submission: found[key] for submission, key in keys.items() if key in found}
    missing = [submission for submission in keys if submission not in labels]
    if missing:
        read = _dsl_labels_read(missing)
        labels.update(read)
        cache.set_many({keys[submission]: label for submission, label in read.items()},
                       DSL_LABEL_S)
    return labels


def _dsl_labels_read(submission_ids: Sequence[int]) -> dict[int, str]:
    # one row per submission from the database; each file's only where its files mix DSLs
    labels, mixed = {}, []
    for submission, dsls, dsl in (Candidate.objects.filter(submission_id__in=submission_ids)
                                  .values("submission_id")
                                  .annotate(dsls=Count("dsl", distinct=True), first=Min("dsl"))
                                  .values_list("submission_id", "dsls", "first").order_by()):
        if dsls == 1:
            labels[submission] = dsl
        else:
            mixed.append(submission)
    files: dict[int, list[tuple[str, str]]] = {}
    for submission, operator, dsl in (Candidate.objects.filter(submission_id__in=mixed)
                                      .order_by("operator__name")
                                      .values_list("submission_id", "operator__name", "dsl")):
        files.setdefault(submission, []).append((operator, dsl))
    labels.update({submission: ", ".join(f"{op}: {d}" for op, d in pairs)
                   for submission, pairs in files.items()})
    return labels


def dsl_rates(*, release: Release, hardware: HardwareProfile) -> list[dict[str, Any]]:
    """Per declared DSL, over every file submitted to this board (ranked mode, teams shown):
    the share of shapes correct beside the share correct and native, the comparison the
    Atrex paper makes (a model mostly correct, far less often in the target DSL).

    Read from the board's kept totals (BoardTally, one row per DSL), less the tallies of
    hidden teams' submissions: two indexed queries, whatever the number of results."""
    totals = {t.dsl: [t.files, t.shapes, t.correct, t.native, t.unverified]
              for t in BoardTally.objects.filter(release=release, hardware=hardware)}
    hidden = (ScoreSummary.objects
              .filter(submission__release=release, submission__hardware=hardware,
                      submission__mode=Submission.Mode.RANKED, submission__baseline="",
                      submission__team__hidden=True)
              .values_list("tally", flat=True))
    for tally in hidden:
        for dsl, counts in (tally or {}).items():
            total = totals.setdefault(dsl, [0] * 5)
            for i, count in enumerate(counts):
                total[i] -= count
    return [{"dsl": dsl, "dsl_name": DSL_LABELS.get(dsl, dsl), "files": files, "shapes": shapes,
             "correctness_rate": correct / shapes, "adoption_rate": native / shapes,
             "unverified_rate": unverified / shapes}
            for dsl, (files, shapes, correct, native, unverified) in sorted(totals.items())
            if shapes > 0]


def _rankable(score: dict[str, Any]) -> bool:
    return all(score[field] == value for field, value in RANKABLE.items())


def board_row(score: dict[str, Any], rank: int | None) -> dict[str, Any]:
    return {
        "rank": rank, "team": score["submission__team__name"],
        "submission": score["submission_id"], "dsl": "",
        **{column: score[column] for column in NUMBER_COLUMNS},
        "output_tokens": score["submission__output_tokens"], "agent": score["submission__agent"],
        "model": score["submission__model_name"],
        "date": score["submission__created_at"].date().isoformat(),
        "badges": _badges(score),
        "environment": score["submission__environment"],
        "tier": score.get("tier"),
    }


def _badges(score: dict[str, Any]) -> list[str]:
    badges = []
    if score.get("lost_jobs"):
        badges.append("evaluation lost (infrastructure): not ranked until re-run")
    elif not score.get("complete", True):
        badges.append("evaluating")
    if score.get("unevaluated_shapes"):
        badges.append(f"{score['unevaluated_shapes']} shapes not evaluated (0)")
    if not score["ranked"]:
        badges.append("suspicious")
    if score.get("interpreter_jobs"):
        badges.append("interpreter check: not ranked")
    if score.get("not_generalising"):
        badges.append(f"does not generalise: {', '.join(score['not_generalising'])}"
                      + score["generalisation_note"])
    if score.get("excluded"):
        reason = score.get("submission__ranking_excluded_reason")
        badges.append(f"excluded by an admin{f': {reason}' if reason else ''}: not ranked")
    if score["fallback_shapes"]:
        badges.append("fallback")
    if score["mixed_shapes"]:
        badges.append("mixed")
    if score.get("library_shapes"):
        badges.append("library")
    return badges


def board_has_shapes(release: Release, hardware: HardwareProfile, board: str) -> bool:
    """Whether any shape this deployment evaluates falls in the subset `board` ranks."""
    return board in boards_with_shapes(release, hardware)


def boards_with_shapes(release: Release, hardware: HardwareProfile) -> frozenset[str]:
    """The subset boards any shape of the release's scored tier falls in on `hardware`.

    Kept in the cache per release and hardware profile's figures (a ScoringContext reads
    every operator's shapes and works out their regimes: some 250 queries): a finished job
    does not change it, only what changes every board does."""
    def compute() -> frozenset[str]:
        subsets = scoring_context(release).subset_operators(hardware)
        return frozenset(name for name, operators in subsets.items() if operators)

    return derived_cache.remember(derived_cache.BOARDS, release_facts_key(
        "subset-boards", release, hardware), compute, RELEASE_FACTS_S)


RELEASE_FACTS_S = 3600  # what a release and a hardware profile's figures decide


def release_facts_key(name: str, release: Release, hardware: HardwareProfile) -> str:
    spec = hashlib.sha256(repr(hardware.as_spec()).encode()).hexdigest()[:16]
    return f"{name}:{release.pk}:{hardware.pk}:{spec}"


def analysis_points(*, release: Release, hardware: HardwareProfile,
                    weight_set: WeightSet) -> list[dict[str, Any]]:
    """Every ranked submission that reported output tokens: tokens spent against S_agg."""
    rows = (SubmissionScore.objects
            .filter(weight_set=weight_set, **RANKABLE, **ON_BOARDS, submission__hardware=hardware,
                    submission__release=release, submission__team__hidden=False,
                    submission__baseline="", submission__output_tokens__isnull=False,
                    aggregate__isnull=False)
            .values("submission_id", "submission__team__name", "submission__agent",
                    "submission__model_name", "submission__output_tokens", "aggregate")
            .order_by("submission__output_tokens"))
    return [{"submission": r["submission_id"], "team": r["submission__team__name"],
             "agent": r["submission__agent"], "model": r["submission__model_name"],
             "output_tokens": r["submission__output_tokens"], "aggregate": r["aggregate"]}
            for r in rows]


def operator_board(*, release: Release, hardware: HardwareProfile, weight_set: WeightSet,
                   operator: str) -> dict[str, Any]:
    """Best S_op per team (`best_first`, the correctness being this operator's), and the
    operator's difficulty across teams. Reads its operator's stored rows only
    (OperatorSummary, written with each submission's summary; S_op, its interval and the
    generalisation flag do not depend on the weights), best per team chosen by the database
    on PostgreSQL."""
    op = Operator.objects.filter(release=release, name=operator).first()
    rows_in = (OperatorSummary.objects
               .filter(operator=op, hardware=hardware, on_board=True, rankable=True,
                       team__hidden=False)
               .values("submission_id", "team_id", "team__name", "created_at", "score",
                       "correctness_rate", "solved", "hidden_score", "interval",
                       "not_generalising", "generalisation_reasons"))
    if connection.vendor == "postgresql":
        rows_in = rows_in.filter(best_per_team(
            OperatorSummary.objects.filter(operator=op, hardware=hardware, on_board=True,
                                           rankable=True),
            "score", "correctness_rate", "created_at"))
    best: dict[int, tuple[tuple[float, ...], dict[str, Any]]] = {}
    entry: dict[str, Any]
    for entry in rows_in:  # type: ignore[assignment]  # plain rows
        key = best_first(entry["score"], entry["correctness_rate"], entry["created_at"])
        team = entry["team_id"]
        if team not in best or key < best[team][0]:
            best[team] = (key, entry)
    ordered = sorted((entry for _, entry in best.values()), key=lambda e: ranked_order(
        e["score"], e["correctness_rate"], e["created_at"]))
    rows: list[dict[str, Any]] = [
        {"rank": None, "team": e["team__name"], "submission": e["submission_id"],
         "score": e["score"], "correctness_rate": e["correctness_rate"],
         "date": e["created_at"].date().isoformat(),
         "badges": ["does not generalise"] if e["not_generalising"] else [],
         "generalisation_why": "; ".join(generalisation_reason_text(r)
                                         for r in e["generalisation_reasons"] or ()),
         "hidden_score": e["hidden_score"], "interval": e["interval"], "ranked_by": "score"}
        for e in ordered]
    for row in rows:
        mark_no_interval(row)
    assign_ranks(rows)
    values = [e["score"] for e in ordered if e["score"] is not None]
    return {
        "operator": operator, "rows": rows, "teams": len(rows),
        # solve_rate's share: teams whose candidate is correct and native on every shape
        "solve_rate": sum(e["solved"] for e in ordered) / len(ordered)
        if ordered else None,  # no team: nothing solved or unsolved yet
        "median_score": statistics.median(values) if values else None,
        # how many hidden shapes the operator has: all a page says of them, beside the
        # S_op over them (rows' "hidden_score")
        "hidden_shapes": hidden_shape_counts(release).get(operator, 0),
        "baselines": _operator_baselines(release=release, hardware=hardware,
                                         weight_set=weight_set, operator=operator),
    }


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


def recorded_on_boards(*, release: Release, hardware: HardwareProfile) -> list[str]:
    """recorded_sources of every submission on the release's boards for `hardware` (the
    analysis, "what changed" and operator pages, which draw on all of them): the board's
    kept totals (BoardRecorded)."""
    return sorted(BoardRecorded.objects.filter(release=release, hardware=hardware,
                                               submissions__gt=0)
                  .values_list("source", flat=True))


def recorded_sources(submission_ids: list[int]) -> list[str]:
    """Where and how the recorded results among these submissions' were measured
    (leaderboard/demo.py: results measured elsewhere and loaded, not evaluated by this
    portal), one line per source: "NVIDIA H200, 2026-12-02, evaluator of …: path". Read
    from their stored summaries (ScoreSummary.recorded), one row per submission."""
    if not submission_ids:
        return []
    recorded = (ScoreSummary.objects.filter(submission_id__in=submission_ids)
                .exclude(recorded=[]).values_list("recorded", flat=True))
    return sorted({source for sources in recorded for source in sources or ()})


def _operator_baselines(*, release: Release, hardware: HardwareProfile, weight_set: WeightSet,
                        operator: str) -> list[dict[str, Any]]:
    # leaderboard.baselines builds its rows with this module's board helpers; imported when
    # called, so that neither module's import waits on the other's
    from leaderboard.baselines import operator_baselines

    return operator_baselines(release=release, hardware=hardware, weight_set=weight_set,
                              operator=operator)
