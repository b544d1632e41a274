"""Weight sets and stored scores: create, activate, rescore (no kernel is ever re-run)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection, models, transaction
from django.db.models import Max
from django.utils import timezone

from evaluation.catalog.models import HardwareProfile, Release
from leaderboard import tiers
from leaderboard.models import BoardFreeze, ScoreSummary, SubmissionScore, WeightSet
from leaderboard.outcomes import ScoringContext
from leaderboard.scoring import (
    SCORE_FIELDS,
    ScoringPolicy,
    SubmissionSummary,
    WeightError,
    combine,
    normalise_weights,
    summarise,
)
from portal import derived_cache
from portal.audit.models import audit
from submissions.environment import submission_environment_update
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
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")


def rescore_weight_set(weight_set: WeightSet) -> int:
    """Bulk: every submission of the release, scored under this weight set.

    Reads each submission's stored summary (computing the few that are missing from
    their shape results) and combines it with the weights; no kernel is re-run and no
    shape result is read for a submission that already has its summary.
    """
    release = weight_set.release
    context = ScoringContext(release)
    hardware = {h.pk: h for h in HardwareProfile.objects.all()}
    stored = {pk: SubmissionSummary.from_json(data) for pk, data in
              ScoreSummary.objects.filter(submission__release=release)
              .values_list("submission_id", "summary").iterator(chunk_size=2000)}
    on = {pk: (hardware_id, excluded) for pk, hardware_id, excluded in Submission.objects
          .filter(release=release).values_list("pk", "hardware_id", "ranking_excluded")}
    missing = [pk for pk in on if pk not in stored]
    if missing:
        stored.update(summaries_rebuild(release, Submission.objects.filter(pk__in=missing)
                                        .select_related("hardware"), context))
    rows = [_score_row(weight_set, pk, stored[pk],
                       context.subset_operators(hardware[hardware_id]), excluded=excluded)
            for pk, (hardware_id, excluded) in on.items()]
    SubmissionScore.objects.filter(weight_set=weight_set).delete()
    SubmissionScore.objects.bulk_create(rows, batch_size=2000)
    derived_cache.changed(derived_cache.BOARDS)
    return len(rows)


def rescore_submission(submission: Submission) -> None:
    """After a job finished: its summary afresh, then its score under every weight set (and
    the environments its results were measured with, which boards show)."""
    submission_environment_update(submission)
    context = ScoringContext(submission.release)
    summary = summaries_rebuild(submission.release, [submission], context)[submission.pk]
    subsets = context.subset_operators(submission.hardware)
    with transaction.atomic():
        for weight_set in submission.release.weight_sets.all():
            row = _score_row(weight_set, submission.pk, summary, subsets,
                             excluded=submission.ranking_excluded)
            SubmissionScore.objects.update_or_create(
                submission=submission, weight_set=weight_set,
                defaults={f: getattr(row, f) for f in SCORE_FIELDS})
        derived_cache.changed(derived_cache.BOARDS)


def summaries_rebuild(release: Release, submissions: Iterable[Submission] | None = None,
                      context: ScoringContext | None = None) -> dict[int, SubmissionSummary]:
    """Summaries from the latest attempt's shape results (all of the release's by default).

    Needed when results change (a job finished, a review) or the release's fallback
    policy changes; weight changes never need it.
    """
    context = context or ScoringContext(release)
    chosen = list(submissions if submissions is not None
                  else Submission.objects.filter(release=release).select_related("hardware"))
    outcomes = context.outcomes_by_submission(chosen, whole_release=submissions is None)
    summaries = {s.pk: summarise(outcomes.get(s.pk, []), _policy(release, s),
                                 complete=s.pk not in context.running,
                                 lost_jobs=context.lost_jobs.get(s.pk, 0),
                                 interpreter_jobs=context.interpreter_jobs.get(s.pk, 0))
                 for s in chosen}
    ScoreSummary.objects.bulk_create(
        [ScoreSummary(submission_id=pk, summary=summary.as_json())
         for pk, summary in summaries.items()],
        update_conflicts=True, unique_fields=["submission"], update_fields=["summary"],
        batch_size=2000)
    return summaries


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
               subsets: Mapping[str, set[str]], *, excluded: bool = False) -> SubmissionScore:
    score = combine(summary, weight_set.weights, subsets, excluded=excluded,
                    generalisation_factor=weight_set.release.generalisation_factor)
    values = {f: getattr(score, f) for f in SCORE_FIELDS}
    return SubmissionScore(submission_id=submission_id, weight_set=weight_set,
                           **{**values, "by_operator": dict(score.by_operator)})


def board_freeze_set(*, release: Release, hardware: HardwareProfile, actor: Any) -> BoardFreeze:
    """Freeze a board now: later submissions are still evaluated, but not shown on it."""
    with transaction.atomic():
        freeze, created = BoardFreeze.objects.select_for_update().get_or_create(
            release=release, hardware=hardware,
            defaults={"frozen_at": timezone.now(), "frozen_by": _user(actor)})
        if created:
            derived_cache.changed(derived_cache.BOARDS)
            audit(actor=actor, action="board.freeze", target=f"board:{release}/{hardware}",
                  before={"frozen_at": None}, after={"frozen_at": freeze.frozen_at.isoformat()})
    return freeze


def board_unfreeze(*, release: Release, hardware: HardwareProfile, actor: Any) -> None:
    with transaction.atomic():
        freeze = (BoardFreeze.objects.select_for_update()
                  .filter(release=release, hardware=hardware).first())
        if freeze is not None:
            freeze.delete()
            derived_cache.changed(derived_cache.BOARDS)
            audit(actor=actor, action="board.unfreeze", target=f"board:{release}/{hardware}",
                  before={"frozen_at": freeze.frozen_at.isoformat()}, after={"frozen_at": None})


def _user(actor: Any) -> Any:
    return actor if getattr(actor, "pk", None) else None
