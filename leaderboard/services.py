"""Weight sets and stored scores: create, activate, rescore (no kernel is ever re-run)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from django.db import connection, models, reset_queries, transaction
from django.db.models import F, Max
from django.utils import timezone
from psycopg.copy import QueuedLibpqWriter

from evaluation.catalog.models import HardwareProfile, Release
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
from leaderboard.outcomes import ScoringContext
from leaderboard.scoring import (
    FLAG_COLUMNS,
    SCORE_FIELDS,
    ScoringPolicy,
    ShapeOutcome,
    SubmissionSummary,
    WeightError,
    combine,
    generalisation_columns,
    normalise_weights,
    solve_rate,
    summarise,
)
from portal import derived_cache
from portal.audit.models import audit
from submissions.models import Submission


def weight_set_create(*, release: Release, weights: Mapping[str, float], source: str,
                      author: Any = None, note: str = "") -> WeightSet:
    """A new immutable version; validated (non-negative, one positive) and normalised."""
    operators = list(release.operators.values_list("name", flat=True))
    unknown = sorted(set(weights) - set(operators))
    if unknown:
        raise WeightError(f"no such operators in {release}: {', '.join(unknown)}")
    normalised = normalise_weights(weights, operators)
    with transaction.atomic():
        # The release row serialises versioning: a lock on the weight-set rows would miss
        # the first version, when there are none to lock.
        Release.objects.select_for_update().get(pk=release.pk)
        version = (WeightSet.objects.filter(release=release)
                   .aggregate(v=Max("version"))["v"] or 0) + 1
        return WeightSet.objects.create(release=release, version=version, weights=normalised,
                                        source=source, author=author if getattr(author, "pk", None)
                                        else None, note=note)


def weight_set_from_release(release: Release) -> WeightSet:
    """Version 1 from the release's operator_importance.json (equal weights if it has none)."""
    existing = release.weight_sets.filter(source=WeightSet.Source.RELEASE).first()
    if existing is not None:
        return existing
    importance = getattr(release, "hidden", None)
    scores = {op: float(entry["importance_score"])
              for op, entry in (importance.importance if importance else {}).items()}
    if not any(scores.values()):
        scores = {name: 1.0 for name in release.operators.values_list("name", flat=True)}
    weight_set = weight_set_create(release=release, weights=scores,
                                   source=str(WeightSet.Source.RELEASE))
    if not release.weight_sets.filter(active=True).exists():
        weight_set_activate(weight_set=weight_set, actor=None)
    return weight_set


def weight_set_activate(*, weight_set: WeightSet, actor: Any) -> int:
    """Make `weight_set` the release's active one and rescore every submission under it.

    Returns the number of submissions rescored. The release row is locked first, so
    activations of one release run one after the other, even while none is active yet
    (the partial unique index one_active_weight_set backs this up).
    """
    with transaction.atomic():
        Release.objects.select_for_update().get(pk=weight_set.release_id)
        sets = WeightSet.objects.filter(release=weight_set.release_id)
        before = sets.filter(active=True).values_list("version", flat=True).first()
        sets.filter(active=True).exclude(pk=weight_set.pk).update(active=False)
        WeightSet.objects.filter(pk=weight_set.pk).update(active=True)
        weight_set.active = True
        count = rescore_weight_set(weight_set)
        audit(actor=actor, action="weights.activate", target=f"release:{weight_set.release}",
              before={"active_version": before}, after={"active_version": weight_set.version})
    _analyze(SubmissionScore)
    return count


def _analyze(model: type[models.Model]) -> None:
    """Fresh planner statistics after a bulk write (PostgreSQL only).

    A rescore writes thousands of score rows under a weight set the statistics have never
    seen. Until autovacuum analyzes the table (up to a minute or more later), the planner
    expects one row and nests 10,000 index lookups: the board query took 66 ms instead of
    35 ms at 10,000 submissions. Analyzing the one table takes about half a second there.

    Only the columns that are not JSON: no query filters or sorts on a JSON column, and
    sampling them detoasts every sampled score row's ~8 KB of JSON (at 80,000 score rows,
    1.4 s for the whole table, 0.4 s without them; issue 42).
    """
    if connection.vendor == "postgresql":
        quote = connection.ops.quote_name
        columns = ", ".join(quote(f.column) for f in model._meta.concrete_fields
                            if not isinstance(f, models.JSONField))
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {quote(model._meta.db_table)} ({columns})")


RESCORE_BATCH = 2000  # submissions combined, then written, at a time
REBUILD_BATCH = 250  # submissions whose shape results are read at a time


def rescore_weight_set(weight_set: WeightSet) -> int:
    """Bulk: every submission of the release, scored under this weight set.

    Reads each submission's stored summary (its per-operator scores, computing the few
    that are missing from their shape results) and combines it with the weights; no kernel
    is re-run and no shape result is read for a submission that already has its summary.
    Streams the summaries in batches of RESCORE_BATCH (keyset on the submission): memory
    is bounded whatever the number of submissions.
    """
    release = weight_set.release
    context = ScoringContext(release)
    hardware = {h.pk: h for h in HardwareProfile.objects.all()}
    missing = Submission.objects.filter(release=release, score_summary__isnull=True)
    if missing.exists():
        summaries_rebuild(release, missing, context)
    SubmissionScore.objects.filter(weight_set=weight_set).delete()
    _rescore_texts_refresh(release)
    count, last = 0, 0
    while True:
        batch = list(ScoreSummary.objects.filter(submission__release=release,
                                                 submission_id__gt=last)
                     .order_by("submission_id")
                     .values_list("submission_id", "rescore_text", "submission__hardware_id",
                                  "submission__ranking_excluded", "submission__team_id",
                                  "submission__created_at")[:RESCORE_BATCH])
        if not batch:
            break
        last = batch[-1][0]
        # A generator: each row is combined while PostgreSQL takes in the ones before it
        # (`_insert_scores`), the two cores busy at once.
        rows = (_score_values(weight_set, pk, *_rescore_inputs(text),
                              context.subset_operators(hardware[hardware_id]),
                              excluded=excluded, placed=(team_id, hardware_id, created_at))
                for pk, text, hardware_id, excluded, team_id, created_at in batch)
        _insert_scores(rows)
        count += len(batch)
    derived_cache.changed(derived_cache.BOARDS)
    return count


# What only the hidden tier's columns read of a summary (`generalisation_columns`): left out
# of its rescore text's weighted inputs, a third of a summary's bytes with a 31-shape tier.
_HIDDEN_TIER_KEYS = frozenset({"hidden_siblings", "hidden_by_operator", "floor_by_operator",
                               "hidden_floor_by_operator"})


def rescore_text(summary: SubmissionSummary, factor: float) -> str:
    """ScoreSummary.rescore_text: the factor, the weighted inputs, then each FLAG_COLUMNS
    value, a JSON text a line (orjson writes no raw line break: one inside a string is
    escaped)."""
    stored = summary.as_json()
    weighted = {key: value for key, value in stored.items() if key not in _HIDDEN_TIER_KEYS}
    flag = generalisation_columns(summary, factor)
    return "\n".join([repr(float(factor)), orjson.dumps(weighted).decode(),
                      *(orjson.dumps(flag[name], option=orjson.OPT_NON_STR_KEYS).decode()
                        for name in FLAG_COLUMNS)])


def _rescore_inputs(text: str) -> tuple[SubmissionSummary, dict[str, Any]]:
    """A rescore text read back: the summary without its hidden tier, and the hidden-tier
    columns as JSON text orjson writes as it is (orjson.Fragment), never decoded and
    encoded again (the note, a string, is decoded)."""
    _, weighted, *flag = text.split("\n")
    columns = dict(zip(FLAG_COLUMNS, flag, strict=True))
    note = orjson.loads(columns.pop("generalisation_note"))
    return (SubmissionSummary.from_json(orjson.loads(weighted)),
            {**{name: orjson.Fragment(value) for name, value in columns.items()},
             "generalisation_note": note})


def _rescore_texts_refresh(release: Release) -> None:
    """Rescore texts missing (a summary written before they were kept) or under another
    factor (an admin changed it since), written from their summaries, keyset batches."""
    factor = release.generalisation_factor
    stale = (ScoreSummary.objects.filter(submission__release=release)
             .exclude(rescore_text__startswith=f"{float(factor)!r}\n")
             .order_by("submission_id").only("submission_id", "summary"))
    last = 0
    while batch := list(stale.filter(submission_id__gt=last)[:RESCORE_BATCH]):
        last = batch[-1].submission_id
        for row in batch:
            row.rescore_text = rescore_text(SubmissionSummary.from_json(row.summary), factor)
        ScoreSummary.objects.bulk_update(batch, ["rescore_text"])


def _insert_scores(rows: Iterable[dict[str, Any]]) -> None:
    """New score rows (their columns' values by attribute name): PostgreSQL's COPY there (a
    rescore writes every submission's), else bulk_create.

    On PostgreSQL the rows are taken one by one while the COPY is open, and a writer
    thread sends them (psycopg's QueuedLibpqWriter): the server parses and indexes the rows
    already sent while the next ones are computed. Sent all at the end, the server's half
    waited for Python's, and the other way round (issue 42)."""
    if connection.vendor != "postgresql":
        SubmissionScore.objects.bulk_create(
            [SubmissionScore(**{name: orjson.loads(orjson.dumps(value))
                                if isinstance(value, orjson.Fragment) else value
                                for name, value in row.items()}) for row in rows],
            batch_size=2000)
        return
    now = timezone.now()
    table = connection.ops.quote_name(SubmissionScore._meta.db_table)
    columns = ", ".join(column for column, _, _ in _SCORE_COPY_COLUMNS)
    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg's own cursor: COPY ... FROM STDIN
        with raw.copy(f"COPY {table} ({columns}) FROM STDIN",
                      writer=QueuedLibpqWriter(raw)) as copy:
            for row in rows:
                row["computed_at"] = now
                copy.write_row([orjson.dumps(row[name], option=orjson.OPT_NON_STR_KEYS)
                                .decode() if is_json else row[name]
                                for _, name, is_json in _SCORE_COPY_COLUMNS])


# (column, attribute, JSON?) of every score column but the key
_SCORE_COPY_COLUMNS = [(f.column, f.attname, isinstance(f, models.JSONField))
                       for f in SubmissionScore._meta.concrete_fields if not f.primary_key]


def rescore_submission(submission: Submission) -> None:
    """After a job finished: its summary afresh, then its score under every weight set (the
    environment its results were measured with, which boards show, is rewritten where the job
    ended, submissions/jobs.py). Only the boards of its release and hardware are dropped from
    the cache (and the pages counting rows across boards)."""
    context = ScoringContext(submission.release)
    with transaction.atomic():
        summary = summaries_rebuild(submission.release, [submission], context)[submission.pk]
        subsets = context.subset_operators(submission.hardware)
        for weight_set in submission.release.weight_sets.all():
            row = _score_row(weight_set, submission.pk, summary, subsets,
                             excluded=submission.ranking_excluded,
                             placed=(submission.team_id, submission.hardware_id,
                                     submission.created_at))
            SubmissionScore.objects.update_or_create(
                submission=submission, weight_set=weight_set,
                defaults={**{f: getattr(row, f) for f in SCORE_FIELDS},
                          "team_id": row.team_id, "hardware_id": row.hardware_id,
                          "created_at": row.created_at})
        derived_cache.changed(derived_cache.board(submission.release_id,
                                                  submission.hardware_id))
        derived_cache.changed(derived_cache.OVERVIEW)


def summaries_rebuild(release: Release, submissions: Iterable[Submission] | None = None,
                      context: ScoringContext | None = None) -> dict[int, SubmissionSummary]:
    """Summaries from the latest attempt's shape results (all of the release's by default),
    with what the boards' aggregates keep of each submission (tallies, recorded sources,
    per-operator rows; the board totals changed by the difference).

    Needed when results change (a job finished, a review) or the release's fallback
    policy changes; weight changes never need it. A list of submissions gets its summaries
    back; the whole release (None) or a queryset is streamed REBUILD_BATCH submissions at a
    time (keyset on the primary key) and nothing is returned: memory stays bounded
    whatever the number of submissions.
    """
    context = context or ScoringContext(release)
    if submissions is not None and not isinstance(submissions, models.QuerySet):
        chosen = list(submissions)
        summaries: dict[int, SubmissionSummary] = {}
        for start in range(0, len(chosen), REBUILD_BATCH):
            summaries.update(_rebuild_batch(release, chosen[start:start + REBUILD_BATCH],
                                            context))
        return summaries
    queryset = (submissions if submissions is not None
                else Submission.objects.filter(release=release))
    last = 0
    while True:
        batch = list(queryset.filter(pk__gt=last).order_by("pk")
                     .select_related("hardware")[:REBUILD_BATCH])
        if not batch:
            return {}
        last = batch[-1].pk
        _rebuild_batch(release, batch, context)
        # With DEBUG on (the embedded default), Django keeps the last 9,000 queries' SQL, and
        # a batch's upsert of summaries is megabytes of it: a 100,000 rebuild grew past 1 GB
        # by a third of the way (issue 42). No request ends inside a rebuild to clear it.
        reset_queries()


def _rebuild_batch(release: Release, chosen: list[Submission],
                   context: ScoringContext) -> dict[int, SubmissionSummary]:
    outcomes = context.outcomes_by_submission(chosen)
    summaries = {s.pk: summarise(outcomes.get(s.pk, []), _policy(release, s),
                                 complete=s.pk not in context.running,
                                 lost_jobs=context.lost_jobs.get(s.pk, 0),
                                 interpreter_jobs=context.interpreter_jobs.get(s.pk, 0))
                 for s in chosen}
    operator_rows = [row for s in chosen for row in _operator_rows(
        release, s, summaries[s.pk], outcomes.get(s.pk, []), context)]
    with transaction.atomic():
        # what the board totals held of these submissions, read under their rows' lock (one
        # writer at a time per submission: the differences add up)
        list(Submission.objects.select_for_update().filter(pk__in=[s.pk for s in chosen])
             .values_list("pk"))
        before = {pk: (tally, recorded) for pk, tally, recorded in ScoreSummary.objects
                  .filter(submission_id__in=[s.pk for s in chosen])
                  .values_list("submission_id", "tally", "recorded")}
        after = {s.pk: _board_share(s, context) for s in chosen}
        factor = release.generalisation_factor
        ScoreSummary.objects.bulk_create(
            [ScoreSummary(submission_id=s.pk, summary=summaries[s.pk].as_json(),
                          tally=after[s.pk][0], recorded=after[s.pk][1],
                          rescore_text=rescore_text(summaries[s.pk], factor)) for s in chosen],
            update_conflicts=True, unique_fields=["submission"],
            update_fields=["summary", "tally", "recorded", "rescore_text"], batch_size=2000)
        OperatorSummary.objects.filter(submission_id__in=[s.pk for s in chosen]).delete()
        OperatorSummary.objects.bulk_create(operator_rows, batch_size=5000)
        _board_totals_change(release, chosen, before, after)
    return summaries


def _board_share(submission: Submission, context: ScoringContext
                 ) -> tuple[dict[str, list[int]], list[str]]:
    """What a submission adds to its board's totals, as its summary keeps it: its tallies
    where the per-DSL rates count it (ranked mode, not a baseline), its recorded sources
    where the boards show it (ranked mode)."""
    ranked = submission.mode == Submission.Mode.RANKED
    return (context.tallies.get(submission.pk, {}) if ranked and not submission.baseline else {},
            sorted(context.recorded.get(submission.pk, ())) if ranked else [])


def _operator_rows(release: Release, submission: Submission, summary: SubmissionSummary,
                   outcomes: list[ShapeOutcome], context: ScoringContext) -> list[OperatorSummary]:
    """The submission's rows of its operators' boards: each operator it has a job for."""
    operators = context.job_operators.get(submission.pk, set())
    if not operators:
        return []
    # every number an operator board shows, as the stored scores have it: combined over the
    # release's operators, equally weighted (S_op, its interval and the flag do not depend
    # on the weights)
    score = combine(summary, dict.fromkeys(context.names, 1.0),
                    context.subset_operators(submission.hardware), excluded=False,
                    generalisation_factor=release.generalisation_factor)
    intervals = score.intervals.get("by_operator") or {}
    rankable = (score.ranked and score.complete and not score.interpreter_jobs
                and not submission.ranking_excluded)
    on_board = submission.mode == Submission.Mode.RANKED and not submission.baseline
    public: dict[str, list[ShapeOutcome]] = {op: [] for op in operators}
    for outcome in outcomes:
        if not outcome.hidden and outcome.operator in public:
            public[outcome.operator].append(outcome)
    coverage = context.coverage.get(submission.pk, {})
    return [OperatorSummary(
        submission_id=submission.pk, operator_id=context.operator_ids[op],
        covered=coverage.get(op, [0, 0])[0], dev_covered=coverage.get(op, [0, 0])[1],
        team_id=submission.team_id, hardware_id=submission.hardware_id,
        created_at=submission.created_at, on_board=on_board, rankable=rankable,
        score=score.by_operator.get(op, 0.0),
        correctness_rate=sum(o.correct for o in shapes) / len(shapes) if shapes else 0.0,
        solved=solve_rate([shapes]) == 1.0,
        hidden_score=score.hidden_by_operator.get(op), interval=intervals.get(op),
        not_generalising=op in score.not_generalising,
        generalisation_reasons=list(score.generalisation_reasons.get(op, ())))
        for op, shapes in public.items()]


def _board_totals_change(release: Release, chosen: list[Submission],
                         before: dict[int, tuple[dict[str, list[int]], list[str]]],
                         after: dict[int, tuple[dict[str, list[int]], list[str]]]) -> None:
    """Add each submission's new share of its board's totals, less its old one."""
    tallies: dict[tuple[int, str], list[int]] = {}
    sources: dict[tuple[int, str], int] = {}
    for s in chosen:
        old_tally, old_recorded = before.get(s.pk, ({}, []))
        new_tally, new_recorded = after[s.pk]
        for sign, tally in ((-1, old_tally or {}), (1, new_tally)):
            for dsl, counts in tally.items():
                total = tallies.setdefault((s.hardware_id, dsl), [0] * 5)
                for i, count in enumerate(counts):
                    total[i] += sign * count
        for sign, recorded in ((-1, old_recorded or []), (1, new_recorded)):
            for source in recorded:
                sources[(s.hardware_id, source)] = sources.get((s.hardware_id, source), 0) + sign
    changes = {key: counts for key, counts in tallies.items() if any(counts)}
    BoardTally.objects.bulk_create(
        [BoardTally(release=release, hardware_id=h, dsl=dsl) for h, dsl in changes],
        ignore_conflicts=True)
    for (hardware_id, dsl), (files, shapes, correct, native, unverified) in sorted(changes.items()):
        BoardTally.objects.filter(release=release, hardware_id=hardware_id, dsl=dsl).update(
            files=F("files") + files, shapes=F("shapes") + shapes,
            correct=F("correct") + correct, native=F("native") + native,
            unverified=F("unverified") + unverified)
    moved = {key: n for key, n in sources.items() if n}
    BoardRecorded.objects.bulk_create(
        [BoardRecorded(release=release, hardware_id=h, source=source) for h, source in moved],
        ignore_conflicts=True)
    for (hardware_id, source), n in sorted(moved.items()):
        BoardRecorded.objects.filter(release=release, hardware_id=hardware_id,
                                     source=source).update(submissions=F("submissions") + n)


def summary_leaves_board(summary: ScoreSummary) -> None:
    """Take a summary's share off its board's totals (it is being deleted)."""
    submission = (Submission.objects.filter(pk=summary.submission_id)
                  .select_related("release").first())
    if submission is None or not (summary.tally or summary.recorded):
        return
    _board_totals_change(submission.release, [submission],
                         {submission.pk: (summary.tally or {}, summary.recorded or [])},
                         {submission.pk: ({}, [])})
    derived_cache.changed(derived_cache.board(submission.release_id, submission.hardware_id))


def board_totals_recompute(release: Release) -> None:
    """The release's board totals afresh from every submission's stored tallies (a repair;
    streamed). Writes never need it: they change the totals by the difference."""
    tallies: dict[tuple[int, str], list[int]] = {}
    sources: dict[tuple[int, str], int] = {}
    rows = (ScoreSummary.objects.filter(submission__release=release)
            .values_list("submission__hardware_id", "tally", "recorded")
            .iterator(chunk_size=2000))
    for hardware_id, tally, recorded in rows:
        for dsl, counts in (tally or {}).items():
            total = tallies.setdefault((hardware_id, dsl), [0] * 5)
            for i, count in enumerate(counts):
                total[i] += count
        for source in recorded or ():
            sources[(hardware_id, source)] = sources.get((hardware_id, source), 0) + 1
    with transaction.atomic():
        BoardTally.objects.filter(release=release).delete()
        BoardTally.objects.bulk_create(
            BoardTally(release=release, hardware_id=h, dsl=dsl, files=c[0], shapes=c[1],
                       correct=c[2], native=c[3], unverified=c[4])
            for (h, dsl), c in tallies.items())
        BoardRecorded.objects.filter(release=release).delete()
        BoardRecorded.objects.bulk_create(
            BoardRecorded(release=release, hardware_id=h, source=source, submissions=n)
            for (h, source), n in sources.items())
        derived_cache.changed(derived_cache.BOARDS)


def release_set_fallback_policy(*, release: Release, fallback_scores_zero: bool,
                                actor: Any) -> None:
    """Change how fallback shapes score, then rebuild the release's summaries and scores."""
    with transaction.atomic():
        before = release.fallback_scores_zero
        Release.objects.filter(pk=release.pk).update(fallback_scores_zero=fallback_scores_zero)
        release.fallback_scores_zero = fallback_scores_zero
        summaries_rebuild(release)
        for weight_set in release.weight_sets.all():
            rescore_weight_set(weight_set)
        audit(actor=actor, action="release.fallback_policy", target=f"release:{release}",
              before={"fallback_scores_zero": before},
              after={"fallback_scores_zero": fallback_scores_zero})


def release_set_ranked_tier(*, release: Release, tier: str, actor: Any) -> None:
    """Change the widest tier the release's boards rank (leaderboard/tiers.py), then
    rebuild its summaries and scores: the shapes that earn attainment change with it."""
    if tier not in tiers.TIERS:
        raise WeightError(f"no tier named {tier!r} (known: {', '.join(tiers.ORDER)})")
    with transaction.atomic():
        before = release.ranked_tier
        Release.objects.filter(pk=release.pk).update(ranked_tier=tier)
        release.ranked_tier = tier
        summaries_rebuild(release)
        for weight_set in release.weight_sets.all():
            rescore_weight_set(weight_set)
        audit(actor=actor, action="release.ranked_tier", target=f"release:{release}",
              before={"ranked_tier": before}, after={"ranked_tier": tier})


def _policy(release: Release, submission: Submission) -> ScoringPolicy:
    # Baselines are PyTorch (or an open library) by design: they show what the reference,
    # or the library, itself attains.
    return ScoringPolicy(fallback_scores_zero=release.fallback_scores_zero
                         and not submission.baseline,
                         earning=tiers.earning_verdicts(release.ranked_tier))


def _score_row(weight_set: WeightSet, submission_id: int, summary: SubmissionSummary,
               subsets: Mapping[str, set[str]], *, excluded: bool = False,
               placed: tuple[int, int, Any] = (0, 0, None)) -> SubmissionScore:
    """The score row; `placed`: the submission's team, hardware and date, copied onto it."""
    return SubmissionScore(**_score_values(weight_set, submission_id, summary, None, subsets,
                                           excluded=excluded, placed=placed))


def _score_values(weight_set: WeightSet, submission_id: int, summary: SubmissionSummary,
                  flag: Mapping[str, Any] | None, subsets: Mapping[str, set[str]], *,
                  excluded: bool = False,
                  placed: tuple[int, int, Any] = (0, 0, None)) -> dict[str, Any]:
    """The score row's values by attribute name (no model built: a rescore writes them all).
    `flag`: the hidden tier's columns as kept with the summary (`_rescore_inputs`), over
    what `combine` gave from a summary without them."""
    score = combine(summary, weight_set.weights, subsets, excluded=excluded,
                    generalisation_factor=weight_set.release.generalisation_factor)
    team_id, hardware_id, created_at = placed
    return {**{f: getattr(score, f) for f in SCORE_FIELDS},
            "by_operator": dict(score.by_operator), "intervals": dict(score.intervals),
            "hidden_by_operator": dict(score.hidden_by_operator),
            "not_generalising": list(score.not_generalising),
            "generalisation": {op: dict(pair) for op, pair in score.generalisation.items()},
            "submission_id": submission_id, "weight_set_id": weight_set.pk,
            "team_id": team_id or None, "hardware_id": hardware_id or None,
            "created_at": created_at, "computed_at": None,
            **(flag or {})}


def board_freeze_set(*, release: Release, hardware: HardwareProfile, actor: Any) -> BoardFreeze:
    """Freeze a board now: later submissions are still evaluated, but not shown on it."""
    with transaction.atomic():
        freeze, created = BoardFreeze.objects.select_for_update().get_or_create(
            release=release, hardware=hardware,
            defaults={"frozen_at": timezone.now(), "frozen_by": _user(actor)})
        if created:
            derived_cache.changed(derived_cache.board(release.pk, hardware.pk))
            derived_cache.changed(derived_cache.OVERVIEW)
            audit(actor=actor, action="board.freeze", target=f"board:{release}/{hardware}",
                  before={"frozen_at": None}, after={"frozen_at": freeze.frozen_at.isoformat()})
    return freeze


def board_unfreeze(*, release: Release, hardware: HardwareProfile, actor: Any) -> None:
    with transaction.atomic():
        freeze = (BoardFreeze.objects.select_for_update()
                  .filter(release=release, hardware=hardware).first())
        if freeze is not None:
            freeze.delete()
            derived_cache.changed(derived_cache.board(release.pk, hardware.pk))
            derived_cache.changed(derived_cache.OVERVIEW)
            audit(actor=actor, action="board.unfreeze", target=f"board:{release}/{hardware}",
                  before={"frozen_at": freeze.frozen_at.isoformat()}, after={"frozen_at": None})


def _user(actor: Any) -> Any:
    return actor if getattr(actor, "pk", None) else None
