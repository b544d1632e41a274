"""Weight sets and stored scores: create, activate, rescore (no kernel is ever re-run)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection, models, transaction
from django.db.models import F, Max
from django.utils import timezone

from evaluation.catalog.models import HardwareProfile, Operator, Release
from evaluation.catalog.selectors import evaluated_shape_ids
from evaluation.harness.release import ShapeRoofline
from evaluation.harness.roofline import roofline_point
from leaderboard.models import BoardFreeze, ScoreSummary, SubmissionScore, WeightSet
from leaderboard.scoring import (
    BALANCED,
    COMPUTE,
    MEMORY,
    SCORE_FIELDS,
    ScoringPolicy,
    ShapeOutcome,
    SubmissionSummary,
    WeightError,
    attainment_error,
    combine,
    normalise_weights,
    summarise,
)
from portal import derived_cache
from portal.audit.models import audit
from submissions.environment import submission_environment_update
from submissions.models import EvaluationJob, ShapeResult, Submission


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
    context = _ScoringContext(release)
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
    context = _ScoringContext(submission.release)
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
                      context: _ScoringContext | None = None) -> dict[int, SubmissionSummary]:
    """Summaries from the latest attempt's shape results (all of the release's by default).

    Needed when results change (a job finished, a review) or the release's fallback
    policy changes; weight changes never need it.
    """
    context = context or _ScoringContext(release)
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


def _policy(release: Release, submission: Submission) -> ScoringPolicy:
    # Baselines are PyTorch by design: they show what the reference itself attains.
    return ScoringPolicy(fallback_scores_zero=release.fallback_scores_zero
                         and not submission.baseline)


_ENDED = (EvaluationJob.Status.SCORED, EvaluationJob.Status.FAILED,
          EvaluationJob.Status.CANCELLED)


class _ScoringContext:
    """Per release, read once: operators, the shapes jobs evaluate, phases, regimes per
    hardware."""

    def __init__(self, release: Release) -> None:
        self.release = release
        self.operators = {op.pk: op for op in Operator.objects.filter(release=release)
                          .select_related("hidden")}
        self.phases = {op.name: _operator_metadata(op).get("phase") for op in self.operators.values()}
        self.shape_phases = {(op.name, shape_id): (meta or {}).get("phase")
                             for op in self.operators.values()
                             for shape_id, meta in (_operator_metadata(op).get("shapes") or {}).items()}
        # The shapes this deployment evaluates: what a job without its own list covers.
        self.shape_ids = {op.name: evaluated_shape_ids(op) for op in self.operators.values()}
        # Filled by outcomes_by_submission: submissions with a job still queued or running,
        # and per submission the jobs lost to an infrastructure failure and those run in
        # Triton's CPU interpreter.
        self.running: set[int] = set()
        self.lost_jobs: dict[int, int] = {}
        self.interpreter_jobs: dict[int, int] = {}
        self._regimes: dict[tuple[str, str, str], str | None] = {}
        self._subsets: dict[str, dict[str, set[str]]] = {}

    def regime(self, operator: Operator, shape_id: str, hardware: HardwareProfile) -> str | None:
        key = (operator.name, shape_id, hardware.name)
        if key not in self._regimes:
            self._regimes[key] = shape_regime(operator, shape_id, hardware)
        return self._regimes[key]

    def phase(self, operator: str, shape_id: str) -> str | None:
        """A shape's own phase where the release gives one, else its operator's."""
        return self.shape_phases.get((operator, shape_id)) or self.phases.get(operator)

    def outcomes_by_submission(self, submissions: list[Submission],
                               whole_release: bool = False) -> dict[int, list[ShapeOutcome]]:
        """Per submission, one outcome per shape its jobs cover: the latest attempt's result,
        or a failed, unevaluated one where a job ended without reporting the shape. Notes the
        submissions with a job still going (`running`) or lost to the infrastructure."""
        hardware = {s.pk: s.hardware for s in submissions}
        grouped: dict[int, list[ShapeOutcome]] = {pk: [] for pk in hardware}
        which = ({"candidate__submission__release": self.release} if whole_release
                 else {"candidate__submission__in": list(hardware)})
        jobs = {pk: row for pk, *row in EvaluationJob.objects.filter(**which).values_list(
            "pk", "candidate__submission_id", "candidate__operator_id", "status",
            "infrastructure_failure", "shape_ids", "mode", "hidden_shape_ids")}
        results: dict[int, dict[str, tuple[Any, ...]]] = {pk: {} for pk in jobs}
        rows = (ShapeResult.every_tier.filter(**{f"job__{k}": v for k, v in which.items()},
                                           attempt=F("job__attempts"))
                .values_list("job_id", "shape__shape_id", "status", "verdict", "attainment",
                             "suspicious", "median_s", "median_se_s", "attainment_with_floor")
                .iterator(chunk_size=20000))
        for job_id, shape_id, *result in rows:
            results[job_id][shape_id] = tuple(result)
        self.running, self.lost_jobs, self.interpreter_jobs = set(), {}, {}
        for job_id, (submission_id, operator_id, status, infrastructure, shape_ids,
                     mode, hidden_ids) in jobs.items():
            if submission_id not in grouped:
                continue
            if mode == EvaluationJob.Mode.INTERPRETER:
                self.interpreter_jobs[submission_id] = \
                    self.interpreter_jobs.get(submission_id, 0) + 1
            if status not in _ENDED:
                self.running.add(submission_id)
            elif status == EvaluationJob.Status.FAILED and infrastructure:
                self.lost_jobs[submission_id] = self.lost_jobs.get(submission_id, 0) + 1
            operator = self.operators[operator_id]
            secret = set(hidden_ids or ())
            for shape_id in [*(shape_ids or self.shape_ids[operator.name]), *(hidden_ids or ())]:
                hidden = shape_id in secret
                reported = results[job_id].get(shape_id)
                kind = self.regime(operator, shape_id, hardware[submission_id])
                phase = self.phase(operator.name, shape_id)
                if reported is None and status not in _ENDED:
                    continue  # still to come
                if reported is None:
                    grouped[submission_id].append(ShapeOutcome(
                        operator=operator.name, shape_id=shape_id, correct=False, verdict=None,
                        attainment=0.0, regime=kind, phase=phase, evaluated=False,
                        hidden=hidden))
                    continue
                result_status, verdict, value, suspicious, median_s, median_se_s, floor = reported
                grouped[submission_id].append(ShapeOutcome(
                    operator=operator.name, shape_id=shape_id, correct=result_status == "passed",
                    verdict=verdict or None, attainment=value, suspicious=suspicious,
                    regime=kind, phase=phase, hidden=hidden, attainment_with_floor=floor,
                    attainment_se=attainment_error(value, median_s, median_se_s)))
        return grouped

    def subset_operators(self, hardware: HardwareProfile) -> dict[str, set[str]]:
        """Which operators have memory-/compute-bound shapes on `hardware`, and which phases."""
        if hardware.name not in self._subsets:
            subsets: dict[str, set[str]] = {"memory": set(), "compute": set(), "prefill": set(),
                                            "decode": set()}
            for op in self.operators.values():
                for shape_id in self.shape_ids[op.name]:
                    phase = self.phase(op.name, shape_id) or ""
                    for part in ("prefill", "decode"):
                        if part in phase:
                            subsets[part].add(op.name)
                    kind = self.regime(op, shape_id, hardware)
                    if kind in (MEMORY, BALANCED):
                        subsets["memory"].add(op.name)
                    if kind in (COMPUTE, BALANCED):
                        subsets["compute"].add(op.name)
            self._subsets[hardware.name] = subsets
        return self._subsets[hardware.name]


def scoring_context(release: Release) -> _ScoringContext:
    """What scoring reads once per release (boards ask it which subsets have shapes)."""
    return _ScoringContext(release)


def _operator_metadata(operator: Operator) -> dict[str, Any]:
    hidden = getattr(operator, "hidden", None)
    return (hidden.metadata if hidden is not None else None) or {}


def _shape_roofline(operator: Operator, shape_id: str) -> ShapeRoofline | None:
    hidden = getattr(operator, "hidden", None)
    return hidden.shape_roofline(shape_id) if hidden is not None else None


def arithmetic_intensity(operator: Operator, shape_id: str) -> float | None:
    """W / Q of a shape in FLOP per byte (for the roofline chart)."""
    shape = _shape_roofline(operator, shape_id)
    if shape is None:
        return None
    q = shape.q_read_bytes + shape.q_write_bytes
    return sum(shape.w_flops.values()) / q if q else None


def shape_regime(operator: Operator, shape_id: str, hardware: HardwareProfile) -> str | None:
    """The shape's regime on `hardware`, by the harness's one definition."""
    shape = _shape_roofline(operator, shape_id)
    return roofline_point(shape, hardware.as_spec()).regime if shape is not None else None


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
