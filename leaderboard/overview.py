"""What the front page and the boards index read: which boards hold rows, each release's
headline board (top rows, baselines, the leader per operator), recent public activity, and
how many of each operator's shapes a board row covers. Reads only, built on the boards'
selectors (leaderboard/selectors.py) and cached like them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count

from evaluation.catalog.models import HardwareProfile, Release, Shape
from evaluation.catalog.selectors import DEV_TIER
from leaderboard.baselines import baseline_rows, production_baseline
from leaderboard.models import OperatorSummary, SubmissionScore, WeightSet
from leaderboard.selectors import (
    ON_BOARDS,
    RANKABLE,
    board_rows,
)
from portal import derived_cache
from submissions.models import Candidate, Submission

INDEX_CACHE_S = 30
HEADLINE_ROWS = 5
DEV_PREFIX = DEV_TIER.rstrip("*")  # "dev-": the dev tier's ids start with it


@dataclass(frozen=True)
class BoardCell:
    """One release on one hardware: how many rows its aggregate board holds."""

    hardware: str
    teams: int  # ranked teams (each team's best submission is one row)
    baselines: int  # reference baselines and production timings beside them

    @property
    def rows(self) -> int:
        return self.teams + self.baselines


@dataclass(frozen=True)
class IndexRow:
    release: Release
    superseded_by: int | None  # the newest version of the name, where this is not it
    cells: list[BoardCell] = field(default_factory=list)

    @property
    def best(self) -> BoardCell | None:
        """The board a visitor should open: the most teams, then the most rows."""
        filled = [c for c in self.cells if c.rows]
        return max(filled, key=lambda c: (c.teams, c.rows)) if filled else None


def board_index() -> list[IndexRow]:
    """Every release (newest version of a name first) by every hardware profile, with the
    rows each aggregate board holds under the release's active weights."""
    return derived_cache.remember((derived_cache.BOARDS, derived_cache.OVERVIEW), "board-index",
                                  _board_index, INDEX_CACHE_S)


def _board_index() -> list[IndexRow]:
    hardware = list(HardwareProfile.objects.order_by("name"))
    active = {ws.release_id: ws for ws in WeightSet.objects.filter(active=True)
              .select_related("release")}
    teams = {(r["submission__release"], r["submission__hardware"]): r["n"] for r in
             SubmissionScore.objects.filter(weight_set__active=True, **RANKABLE, **ON_BOARDS,
                                            submission__team__hidden=False,
                                            submission__baseline="")
             .values("submission__release", "submission__hardware")
             .annotate(n=Count("submission__team", distinct=True)).order_by()}
    stored = {(r["submission__release"], r["submission__hardware"]): r["n"] for r in
              SubmissionScore.objects.filter(weight_set__active=True, interpreter_jobs=0,
                                             **ON_BOARDS)
              .exclude(submission__baseline="")
              .values("submission__release", "submission__hardware")
              .annotate(n=Count("submission__baseline", distinct=True)).order_by()}
    releases = list(Release.objects.order_by("name", "-version"))
    newest = {r.name: r.version for r in sorted(releases, key=lambda r: r.version)}
    rows = []
    for release in releases:
        row = IndexRow(release=release, superseded_by=newest[release.name]
                       if newest[release.name] != release.version else None)
        weight_set = active.get(release.pk)
        for profile in hardware:
            key = (release.pk, profile.pk)
            production = weight_set is not None and production_baseline(
                release=release, hardware=profile, weight_set=weight_set) is not None
            row.cells.append(BoardCell(hardware=profile.name, teams=teams.get(key, 0),
                                       baselines=stored.get(key, 0) + int(production)))
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Headline:
    """A release's headline board: its best-filled hardware, top rows and baselines."""

    release: Release
    hardware: HardwareProfile
    weight_set: WeightSet
    rows: list[dict[str, Any]]  # the top HEADLINE_ROWS teams
    teams: int
    baselines: list[dict[str, Any]]
    leaders: list[dict[str, Any]]  # per operator: the best S_op among the board's teams


def headline_boards() -> list[Headline]:
    """The headline board of every current release (no newer version) that has rows."""
    return derived_cache.remember((derived_cache.BOARDS, derived_cache.OVERVIEW), "headlines",
                                  _headline_boards, INDEX_CACHE_S)


def _headline_boards() -> list[Headline]:
    headlines = []
    profiles = {h.name: h for h in HardwareProfile.objects.all()}
    for entry in board_index():
        best = entry.best
        weight_set = entry.release.weight_sets.filter(active=True).first()
        if entry.superseded_by is not None or best is None or weight_set is None:
            continue
        hardware = profiles[best.hardware]
        rows = board_rows(release=entry.release, hardware=hardware, weight_set=weight_set)
        baselines = baseline_rows(release=entry.release, hardware=hardware,
                                  weight_set=weight_set)
        headlines.append(Headline(
            release=entry.release, hardware=hardware, weight_set=weight_set,
            rows=rows[:HEADLINE_ROWS], teams=len(rows), baselines=baselines,
            leaders=operator_leaders(weight_set, rows, baselines)))
    # the boards with the most teams first: a visitor sees a contest before a lone baseline
    return sorted(headlines, key=lambda h: (-h.teams, -len(h.baselines), h.release.name))


def operator_leaders(weight_set: WeightSet, rows: list[dict[str, Any]],
                     baselines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per operator of the weights: the best S_op among the board's rows (each team's best
    submission by S_agg) and who holds it, beside the first stored baseline's S_op."""
    ranked = {r["submission"]: r["team"] for r in rows if r.get("rank") is not None}
    reference = next((b for b in baselines if b.get("submission")), None)
    wanted = [*ranked, *([reference["submission"]] if reference else [])]
    by_submission = dict(SubmissionScore.objects.filter(weight_set=weight_set,
                                                        submission_id__in=wanted)
                         .values_list("submission_id", "by_operator"))
    # an operator a team left out scores 0 in its S_agg, but leads nowhere
    submitted = set(Candidate.objects.filter(submission_id__in=wanted)
                    .values_list("submission_id", "operator__name"))
    leaders = []
    for operator in sorted(weight_set.weights, key=lambda op: -weight_set.weights[op]):
        scores = [(s, team) for pk, team in ranked.items() if (pk, operator) in submitted
                  and (s := (by_submission.get(pk) or {}).get(operator)) is not None]
        best = max(scores, default=None, key=lambda pair: pair[0])
        baseline = (by_submission.get(reference["submission"]) or {}).get(operator) \
            if reference else None
        leaders.append({"operator": operator, "weight": weight_set.weights[operator],
                        "score": best[0] if best else None, "team": best[1] if best else "",
                        "baseline": baseline})
    return leaders


def recent_activity(limit: int = 8) -> list[dict[str, Any]]:
    """The latest ranked submissions of shown teams (checks and baselines are nobody's
    business but their team's), with their S_agg under the active weights once scored."""
    submissions = list(Submission.objects.filter(**{k.removeprefix("submission__"): v
                                                    for k, v in ON_BOARDS.items()},
                                                 team__hidden=False, baseline="")
                       .select_related("team", "release", "hardware")
                       .order_by("-created_at")[:limit])
    scores = {pk: (aggregate, complete) for pk, aggregate, complete in SubmissionScore.objects
              .filter(weight_set__active=True, submission__in=submissions)
              .values_list("submission_id", "aggregate", "complete")}
    return [{"submission": s, "aggregate": scores.get(s.pk, (None, False))[0],
             "scored": scores.get(s.pk, (None, False))[1]} for s in submissions]


@dataclass(frozen=True)
class Coverage:
    """How many of each operator's scored shapes one submission's results cover."""

    covered: dict[str, int]  # operator -> scored-tier shapes with a result
    totals: dict[str, int]  # operator -> the release's scored-tier shapes
    dev_only: bool  # results on the dev tier only (a CPU portal's interpreter check)

    @property
    def text(self) -> str:
        if self.dev_only:
            return "dev tier"
        return f"{sum(self.covered.values())}/{sum(self.totals.values())}"

    @property
    def detail(self) -> str:
        """Per operator, "rms_norm 8/8", the operators not submitted last."""
        return ", ".join(f"{op} {self.covered.get(op, 0)}/{total}"
                         for op, total in sorted(self.totals.items(),
                                                 key=lambda i: (i[0] not in self.covered, i[0])))


def shape_coverage(release: Release, submission_ids: list[int]) -> dict[int, Coverage]:
    """Per submission: of each operator's scored-tier shapes, how many its latest results
    cover (a recorded or cancelled evaluation may cover few; its S_op stands on those)."""
    totals: dict[str, int] = dict(
        Shape.objects.filter(operator__release=release)
        .exclude(shape_id__startswith=DEV_PREFIX)
        .values("operator__name").annotate(n=Count("id")).values_list("operator__name", "n"))
    covered: dict[int, dict[str, int]] = {pk: {} for pk in submission_ids}
    dev: dict[int, int] = {}
    # kept with each submission's summary: one row per submission and operator
    for submission, operator, scored, dev_count in (
            OperatorSummary.objects.filter(submission_id__in=submission_ids)
            .values_list("submission_id", "operator__name", "covered", "dev_covered")):
        if dev_count:
            dev[submission] = dev.get(submission, 0) + dev_count
        if scored:
            covered[submission][operator] = covered[submission].get(operator, 0) + scored
    return {pk: Coverage(covered=ops, totals=totals,
                         dev_only=not ops and bool(dev.get(pk)))
            for pk, ops in covered.items()}
