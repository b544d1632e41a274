"""Scoring: pure functions over plain data (DESIGN.md, "Scoring").

- a shape scores its attainment a = SOL / T in (0, 1]; 0 when compile or correctness
  failed; 0 under the default policy when its verdict does not earn in the release's
  widest ranked tier (leaderboard/tiers.py: native only by default; mixed, library shapes
  where the release ranks wider tiers; a fallback never);
  a > 1 is physically impossible: the shape is quarantined and the whole submission is
  not ranked until an admin has reviewed it.
- S_op = median of a over the operator's shapes.
- S_agg = sum_op w_op * S_op with weights normalised over the release's operators; an
  operator without a candidate scores 0.
- S per regime / phase: the same over the shapes of that regime / phase only, with the
  weights renormalised over the operators that have such shapes. A shape's regime is the
  harness's (`evaluation.harness.roofline.regime`); a balanced shape counts on both the
  memory- and the compute-bound board. A shape's phase is its own where the release gives
  one, else its operator's.
- Only whole evaluations are ranked: a submission whose jobs have not all ended, or one
  ended by an infrastructure failure, is `complete=False`. The shapes of a job that ended
  without reporting them (cancelled, or failed) score 0, as failed shapes do, and are
  counted in `unevaluated_shapes` so boards can say so.
- A job run in Triton's CPU interpreter is a check, not a measurement: a submission with one
  is counted in `interpreter_jobs` and never ranked (boards leave it out).
- A release's hidden shapes (docs/admins.md) count in none of the above: S_op over them is
  `hidden_by_operator`. Each hidden shape is compared with its public sibling (the public
  shape it is made from by changing one size: evaluation/catalog/siblings.py), and an
  operator is flagged "does not generalise" (`not_generalising`) where any hidden shape
  failed, fell back or was not evaluated while its sibling earned, or where its a_floor =
  min(1, (SOL + launch floor) / T) is below its sibling's divided by the release's
  generalisation factor (default 2); `generalisation_reasons` says which hidden shape (by
  its number, never its id or sizes), against which public one, with both figures. One
  shape is enough: with the medians over each tier compared (the rule before 2026-12-04),
  a kernel that fell back on one of an operator's two hidden shapes had a hidden median of
  half its public one, not below it. The floor keeps shape mixes out of it: a decode shape
  is launch-bound at a few percent whatever the kernel (on the H200 an honest Triton
  rms_norm scored S_op 0.176 on the starter's public shapes and 0.090 on its hidden ones;
  with the floor 0.988 and 1.000: benchmarks/results/h200-2026-12-03c/), and the sibling is
  the public shape nearest in size. `generalisation` still holds both tiers' medians of
  a_floor. The flag does not change a rank; an admin may exclude the submission from
  ranking (`excluded`). A suspicious hidden shape quarantines like any.
- Every S_op, S_agg and subset score carries a 95% interval, score +- 1.96 standard errors.
  A shape's attainment error comes from its timing samples (the bootstrap standard error of
  its median, evaluation/harness/confidence.py, times a / T); S_op's from drawing every
  shape around its attainment with that error and taking the median, again and again (a
  fixed seed: a rescore gives the same interval); S_agg's from the operators' errors,
  independent, weighted: sqrt(sum (w_op * se_op)^2). Failed and fallback shapes score 0
  with no error; an operator without a candidate scores 0 with none either. Where a shape
  scored above 0 has no error (results stored before 2026-12-03 kept no samples), its
  operator's interval, and every interval that rests on it, is unknown (None).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from types import MappingProxyType
from typing import Any, cast, get_type_hints

import numpy as np

from evaluation.harness.results import UNVERIFIED_ON_CPU
from leaderboard.tiers import submission_tier
from portal.errors import DomainError

NATIVE, MIXED, LIBRARY = "native", "mixed", "library"
MEMORY, COMPUTE, BALANCED = "memory", "compute", "balanced"


class WeightError(DomainError, ValueError):
    """Weights that cannot be used: negative, or none positive."""


@dataclass(frozen=True)
class ShapeOutcome:
    """One shape of one submission, as stored: what scoring needs and nothing else."""

    operator: str
    shape_id: str
    correct: bool
    verdict: str | None
    attainment: float | None  # None: not measured (CPU) or not computable
    suspicious: bool = False
    regime: str | None = None  # "memory", "compute" or "balanced"
    phase: str | None = None  # "prefill", "decode" or "prefill/decode"
    evaluated: bool = True  # False: its job ended without reporting it (scores 0)
    attainment_se: float | None = None  # the attainment's standard error (None: unknown)
    hidden: bool = False  # a shape of the release's hidden tier: scored apart (S_op hidden)
    attainment_with_floor: float | None = None  # min(1, (SOL + launch floor) / T)
    sibling: str | None = None  # a hidden shape's public sibling (the shape compared with)


@dataclass(frozen=True)
class ScoringPolicy:
    fallback_scores_zero: bool = True  # the default: only what `earning` names earns attainment
    # the verdicts whose correct shapes earn: the release's widest ranked tier's
    # (leaderboard/tiers.py; the default, explicit DSL, is native only)
    earning: frozenset[str] = frozenset({NATIVE})


@dataclass(frozen=True)
class WeightedScore:
    """A submission's scores under one weight set (stored as leaderboard.models.SubmissionScore)."""

    ranked: bool  # False while any shape is quarantined as suspicious
    aggregate: float | None
    unweighted_mean: float | None
    by_operator: Mapping[str, float | None]
    memory: float | None
    compute: float | None
    prefill: float | None
    decode: float | None
    correctness_rate: float
    dsl_adoption_rate: float
    mixed_shapes: int = 0  # correct shapes partly in the DSL (badged on boards)
    fallback_shapes: int = 0  # correct shapes run by PyTorch, a vendor library or torch.compile
    complete: bool = True  # every job ended, none by an infrastructure failure: rankable
    unevaluated_shapes: int = 0  # shapes of cancelled or failed jobs, scored 0
    lost_jobs: int = 0  # jobs ended by an infrastructure failure (not the team's doing)
    interpreter_jobs: int = 0  # jobs run in Triton's CPU interpreter: never ranked
    # 95% intervals [low, high] (None: unknown): "aggregate", the subsets by name, and
    # "by_operator" {operator: [low, high] or None}
    intervals: Mapping[str, Any] = field(default_factory=dict)
    # S_op over the release's hidden shapes, per operator that has them
    hidden_by_operator: Mapping[str, float | None] = field(default_factory=dict)
    # operators whose hidden median a_floor is below their public one / the release's factor
    not_generalising: Sequence[str] = ()
    # per operator with hidden shapes: {"public": median a_floor, "hidden": median a_floor}
    generalisation: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    # per flagged operator, why: each hidden shape that gave it away (`generalisation_failures`)
    generalisation_reasons: Mapping[str, Sequence[Mapping[str, Any]]] = field(
        default_factory=dict)
    excluded: bool = False  # an admin took the submission off the boards' ranks
    library_shapes: int = 0  # correct shapes run by an installed library's kernels
    tier: str | None = None  # the narrowest tier holding every shape that earned (tiers.py)
    # the flag's why as a board's badge says it (`generalisation_note`): kept with the score,
    # so a board reads one short text per row, not every reason to build it on each request
    generalisation_note: str = ""


DEFAULT_GENERALISATION_FACTOR = 2.0  # the release's own: Release.generalisation_factor
INTERVAL_Z = 1.96  # two-sided 95%, for a score that is roughly normal around its value
REPLICATES = 200
SEED = 20261203


# The stored score's fields, in one place: leaderboard.models.SubmissionScore has a column for
# each (a team's page, the share page and the board show chosen subsets of them).
SCORE_FIELDS = tuple(f.name for f in fields(WeightedScore))


def shape_score(outcome: ShapeOutcome, policy: ScoringPolicy = ScoringPolicy()) -> float | None:
    if not outcome.correct:
        return 0.0
    if outcome.verdict == UNVERIFIED_ON_CPU:
        return None  # an interpreter check: no time, and no verdict a score could rest on
    if outcome.verdict not in policy.earning and policy.fallback_scores_zero:
        return 0.0
    return outcome.attainment


def operator_score(scores: Iterable[float | None]) -> float | None:
    """Median over the operator's shapes; None when any shape has no score yet."""
    values = list(scores)
    if not values or any(v is None for v in values):
        return None
    return float(statistics.median(v for v in values if v is not None))


def normalise_weights(weights: Mapping[str, float], operators: Iterable[str]) -> dict[str, float]:
    """Weights over exactly `operators` (absent ones weigh 0), summing to 1."""
    chosen = {op: float(weights.get(op, 0.0)) for op in operators}
    negative = sorted(op for op, w in chosen.items() if w < 0)
    if negative:
        raise WeightError(f"negative weights for {', '.join(negative)}")
    total = sum(chosen.values())
    if total <= 0:
        raise WeightError("at least one operator needs a positive weight")
    return {op: w / total for op, w in chosen.items()}


def weighted_score(by_operator: Mapping[str, float | None],
                   weights: Mapping[str, float]) -> float | None:
    """sum w_op * S_op over normalised weights; a missing operator scores 0, and an
    untimed one (None) with a positive weight leaves the sum unknown. (A plain loop: a
    rescore calls this five times per submission.)"""
    total = 0.0
    for op, weight in weights.items():
        if weight > 0:
            value = by_operator.get(op, 0.0)
            if value is None:
                return None
            total += weight * value
    return total


@functools.lru_cache(maxsize=256)
def _normalised(items: tuple[tuple[str, float], ...],
                operators: tuple[str, ...]) -> Mapping[str, float]:
    """normalise_weights, once per weight set and operator subset (a rescore combines
    every submission under the same few): read-only, shared between calls."""
    return MappingProxyType(normalise_weights(dict(items), operators))


def unweighted_mean(by_operator: Mapping[str, float | None], operators: Sequence[str]) -> float | None:
    values = [by_operator.get(op, 0.0) for op in operators]
    if not values or any(v is None for v in values):
        return None
    return float(statistics.fmean(v for v in values if v is not None))


SUBSETS: Mapping[str, Callable[[ShapeOutcome], bool]] = {
    "memory": lambda o: o.regime in (MEMORY, BALANCED),
    "compute": lambda o: o.regime in (COMPUTE, BALANCED),
    "prefill": lambda o: "prefill" in (o.phase or ""),
    "decode": lambda o: "decode" in (o.phase or ""),
}


@dataclass(frozen=True)
class SubmissionSummary:
    """Everything about a submission's results that does not depend on the weights.

    Stored once per submission when its jobs finish; a weight change only re-runs
    `combine` over these summaries, which is what makes a bulk rescore cheap.
    """

    ranked: bool
    by_operator: Mapping[str, float | None]
    by_subset: Mapping[str, Mapping[str, float | None]]  # subset -> operator -> S over its shapes
    shapes: int
    correct: int
    native: int
    mixed: int = 0
    fallback: int = 0
    complete: bool = True
    unevaluated: int = 0
    lost_jobs: int = 0
    interpreter_jobs: int = 0
    # standard errors of the operator scores: "all" and each subset -> operator -> se or None
    errors: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    hidden_by_operator: Mapping[str, float | None] = field(default_factory=dict)
    # the medians of a_floor the generalisation flag compares: public and hidden, per operator
    floor_by_operator: Mapping[str, float | None] = field(default_factory=dict)
    hidden_floor_by_operator: Mapping[str, float | None] = field(default_factory=dict)
    hidden_shapes: int = 0
    hidden_correct: int = 0
    library: int = 0
    # each hidden shape beside its public sibling (`sibling_comparisons`); None in a summary
    # stored before 2026-12-04, whose flag is still the medians' (`combine`)
    hidden_siblings: Sequence[Mapping[str, Any]] | None = None

    def as_json(self) -> dict[str, object]:
        """The stored form: every field under its own name, mappings as plain dicts."""
        return {f.name: _SUMMARY_CODECS[f.name].dump(getattr(self, f.name))
                for f in fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> SubmissionSummary:
        """A stored summary read back; a key an older summary lacks takes the field's
        default (a mapping stored as null too), a key without a default is required.

        Mappings and lists of `data` already of their fields' types are kept, not copied:
        the summary shares them (give it freshly decoded JSON)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            codec = _SUMMARY_CODECS[f.name]
            raw = data.get(f.name)
            if f.name not in data or (raw is None and codec.null_is_missing):
                if not _has_default(f):
                    raise KeyError(f.name)
                continue
            values[f.name] = codec.load(raw)
        return cls(**values)


def _has_default(f: Field[Any]) -> bool:
    return f.default is not MISSING or f.default_factory is not MISSING


def _json_bool(value: object) -> bool:
    return bool(value)


def _json_int(value: object) -> int:
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"expected an integer, got {type(value).__name__}")


def _json_score(value: object) -> float | None:
    if value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return float(value)
    raise TypeError(f"expected a number or null, got {type(value).__name__}")


def _json_mapping(value: object) -> Mapping[object, object]:
    if isinstance(value, Mapping):
        return value
    raise TypeError(f"expected an object, got {type(value).__name__}")


# What `as_json` writes and a JSON decoder gives back: string keys, scores as floats or null.
_JSON_KEY_TYPES = frozenset({str})
_JSON_SCORE_TYPES = frozenset({float, type(None)})


def _json_scores(value: object) -> dict[str, float | None]:
    mapping = _json_mapping(value)
    # A summary as `as_json` wrote it is taken as decoded: a rescore reads 10,000 of them,
    # and rebuilding every mapping value by value took a third of it (issue 42). The types
    # are still checked, by C-level type sets; anything else (an int score stored by an
    # older summary, a bad value) goes value by value, with its error.
    if (type(mapping) is dict and _JSON_KEY_TYPES.issuperset(map(type, mapping))
            and _JSON_SCORE_TYPES.issuperset(map(type, mapping.values()))):
        return cast(dict[str, float | None], mapping)
    return {str(k): _json_score(v) for k, v in mapping.items()}


def _json_subset_scores(value: object) -> dict[str, dict[str, float | None]]:
    return {str(k): _json_scores(v) for k, v in _json_mapping(value).items()}


def _json_records(value: object) -> list[dict[str, Any]] | None:
    if value is None:
        return None
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    # as decoded, where it already is a list of objects (see `_json_scores`)
    if type(value) is list and all(type(item) is dict and _JSON_KEY_TYPES.issuperset(
            map(type, item)) for item in value):
        return cast(list[dict[str, Any]], value)
    return [{str(k): v for k, v in _json_mapping(item).items()} for item in value]


def _dump_scalar(value: object) -> object:
    return value


def _dump_scores(value: object) -> object:
    return dict(_json_mapping(value))


def _dump_subset_scores(value: object) -> object:
    return {k: dict(_json_mapping(v)) for k, v in _json_mapping(value).items()}


def _dump_records(value: object) -> object:
    if value is None:
        return None
    if not isinstance(value, Sequence):
        raise TypeError(f"expected a sequence, got {type(value).__name__}")
    return [dict(_json_mapping(item)) for item in value]


@dataclass(frozen=True)
class _FieldCodec:
    """How one declared field type is written to and read from the stored JSON."""

    dump: Callable[[object], object]
    load: Callable[[object], object]
    null_is_missing: bool = False  # a stored null takes the field's default


# One codec per field type SubmissionSummary declares (its annotations, resolved); a field of
# another type fails at import, in `_field_codecs`.
_CODECS_BY_TYPE: dict[object, _FieldCodec] = {
    bool: _FieldCodec(_dump_scalar, _json_bool),
    int: _FieldCodec(_dump_scalar, _json_int),
    Mapping[str, float | None]: _FieldCodec(_dump_scores, _json_scores, null_is_missing=True),
    Mapping[str, Mapping[str, float | None]]: _FieldCodec(
        _dump_subset_scores, _json_subset_scores, null_is_missing=True),
    Sequence[Mapping[str, Any]] | None: _FieldCodec(_dump_records, _json_records),
}


def _field_codecs(cls: type) -> Mapping[str, _FieldCodec]:
    hints = get_type_hints(cls)
    codecs: dict[str, _FieldCodec] = {}
    for f in fields(cls):
        codec = _CODECS_BY_TYPE.get(hints[f.name])
        if codec is None:
            raise TypeError(f"{cls.__name__}.{f.name}: no JSON codec for {hints[f.name]!r}")
        codecs[f.name] = codec
    return MappingProxyType(codecs)


_SUMMARY_CODECS = _field_codecs(SubmissionSummary)


def summarise(outcomes: Sequence[ShapeOutcome], policy: ScoringPolicy = ScoringPolicy(), *,
              complete: bool = True, lost_jobs: int = 0,
              interpreter_jobs: int = 0) -> SubmissionSummary:
    """Per-operator medians, overall and per subset, and the rates' counts.

    `complete` says whether the evaluation is whole (every job ended, none by an
    infrastructure failure, of which there were `lost_jobs`); an incomplete one is never
    ranked, nor is one with `interpreter_jobs` (run in Triton's CPU interpreter).
    """
    hidden = [o for o in outcomes if o.hidden]
    quarantined = any(o.suspicious for o in outcomes)  # a hidden shape's too
    outcomes = [o for o in outcomes if not o.hidden]
    everything = _by_operator(outcomes, policy, lambda o: True)
    subsets = {name: _by_operator(outcomes, policy, keep) for name, keep in SUBSETS.items()}
    return SubmissionSummary(
        ranked=not quarantined,
        hidden_by_operator=_by_operator(hidden, policy, lambda o: True)[0],
        floor_by_operator=_floor_by_operator(outcomes, policy) if hidden else {},
        hidden_floor_by_operator=_floor_by_operator(hidden, policy),
        hidden_shapes=len(hidden), hidden_correct=sum(o.correct for o in hidden),
        hidden_siblings=sibling_comparisons([*outcomes, *hidden], policy),
        by_operator=everything[0],
        by_subset={name: scores for name, (scores, _) in subsets.items()},
        errors={"all": everything[1], **{name: errors for name, (_, errors) in subsets.items()}},
        shapes=len(outcomes),
        correct=sum(o.correct for o in outcomes),
        native=sum(o.correct and o.verdict == NATIVE for o in outcomes),
        mixed=sum(o.correct and o.verdict == MIXED for o in outcomes),
        library=sum(o.correct and o.verdict == LIBRARY for o in outcomes),
        fallback=sum(o.correct and (o.verdict or "").startswith("fallback") for o in outcomes),
        complete=complete and not lost_jobs,
        unevaluated=sum(not o.evaluated for o in outcomes),
        lost_jobs=lost_jobs,
        interpreter_jobs=interpreter_jobs,
    )


def combine(summary: SubmissionSummary, weights: Mapping[str, float],
            subset_operators: Mapping[str, Iterable[str]] | None = None, *,
            generalisation_factor: float = DEFAULT_GENERALISATION_FACTOR,
            excluded: bool = False) -> WeightedScore:
    """Every number a board shows for one submission, under `weights` (spanning the release).

    `subset_operators` names, per subset ("memory", "compute", "prefill", "decode"), the
    release's operators that have shapes in it, so an operator a team left out still
    counts 0 there. Without it, the submission's own shapes decide. `excluded`: an admin
    took the submission off the ranks (it is still shown).
    """
    normalised = _normalised(tuple(weights.items()), tuple(weights))
    normalised_items = tuple(normalised.items())
    operators = sorted(normalised)
    flag = generalisation_columns(summary, generalisation_factor)
    by_operator = summary.by_operator
    total = summary.shapes
    aggregate = weighted_score(by_operator, normalised)
    errors = summary.errors.get("all")
    intervals: dict[str, Any] = {
        "aggregate": _interval(aggregate, _weighted_error(by_operator, errors, normalised)),
        "by_operator": {op: _interval(by_operator[op], None if errors is None
                                      else errors.get(op)) if op in by_operator
                        else [0.0, 0.0] for op in operators}}  # no candidate: 0, certainly
    subsets: dict[str, Any] = {}  # name -> float | None
    for name in SUBSETS:
        scores = summary.by_subset.get(name, {})
        members = set(scores) if subset_operators is None else set(subset_operators.get(name, ()))
        # An operator submitted but not timed (an interpreter check) whose evaluated shapes
        # miss this subset is not timed here either, not 0 (a failure).
        scores = {**{op: None for op in members if by_operator.get(op, 0.0) is None}, **scores}
        present = [op for op in normalised if op in members and normalised[op] > 0]
        if not present:
            subsets[name] = intervals[name] = None
            continue
        subset_weights = _normalised(normalised_items, tuple(present))
        subsets[name] = weighted_score(scores, subset_weights)
        intervals[name] = _interval(subsets[name], _weighted_error(
            scores, summary.errors.get(name), subset_weights))
    return WeightedScore(
        ranked=summary.ranked,
        aggregate=aggregate,
        unweighted_mean=unweighted_mean(by_operator, operators),
        by_operator={op: by_operator.get(op, 0.0) for op in operators},
        **subsets,
        correctness_rate=summary.correct / total if total else 0.0,
        dsl_adoption_rate=summary.native / total if total else 0.0,
        mixed_shapes=summary.mixed, fallback_shapes=summary.fallback,
        complete=summary.complete, unevaluated_shapes=summary.unevaluated,
        lost_jobs=summary.lost_jobs, interpreter_jobs=summary.interpreter_jobs,
        intervals=intervals,
        excluded=excluded,
        library_shapes=summary.library,
        tier=submission_tier(native=summary.native, mixed=summary.mixed, library=summary.library),
        **flag,
    )


# The score columns `generalisation_columns` gives: they follow from the summary's hidden tier
# and the release's factor, never from the weights.
FLAG_COLUMNS = ("hidden_by_operator", "not_generalising", "generalisation",
                "generalisation_reasons", "generalisation_note")


def generalisation_columns(summary: SubmissionSummary, factor: float) -> dict[str, Any]:
    """The hidden tier's columns of every score row of the submission (FLAG_COLUMNS).

    Worked out once per summary and kept with it (`ScoreSummary.rescore_text`): a bulk rescore
    copies them instead of reading the summary's hidden siblings, a third of its bytes,
    and comparing them again for every weight set (issue 42)."""
    reasons = generalisation_failures(summary.hidden_siblings or (), factor)
    not_generalising = (sorted(reasons) if summary.hidden_siblings is not None
                        else operators_not_generalising(summary.floor_by_operator,
                                                        summary.hidden_floor_by_operator,
                                                        factor))
    return {"hidden_by_operator": dict(summary.hidden_by_operator),
            "not_generalising": not_generalising,
            "generalisation": {op: {"public": summary.floor_by_operator.get(op), "hidden": value}
                               for op, value in summary.hidden_floor_by_operator.items()},
            "generalisation_reasons": reasons,
            "generalisation_note": generalisation_note(reasons, not_generalising)}


# A shape's state beside its figure in a sibling comparison
PASSED, FAILED, FELL_BACK, NOT_EVALUATED = "passed", "failed", "fell back", "not evaluated"
BELOW = "below"  # a generalisation failure: the hidden a_floor below its sibling's / factor


def sibling_comparisons(outcomes: Sequence[ShapeOutcome],
                        policy: ScoringPolicy = ScoringPolicy()) -> list[dict[str, Any]]:
    """Each hidden shape beside its public sibling, in the order given: the operator, the
    hidden shape by number ("hidden shape 2 of 3": never its id, whose sizes are the
    secret), the sibling's id, and per side its a_floor (0 where the shape scores 0, None
    where it has no time) and state (passed, failed, fell back, not evaluated)."""
    public = {(o.operator, o.shape_id): o for o in outcomes if not o.hidden}
    hidden = [o for o in outcomes if o.hidden]
    counts: dict[str, int] = {}
    for outcome in hidden:
        counts[outcome.operator] = counts.get(outcome.operator, 0) + 1
    numbers: dict[str, int] = {}
    comparisons = []
    for outcome in hidden:
        numbers[outcome.operator] = numbers.get(outcome.operator, 0) + 1
        sibling = public.get((outcome.operator, outcome.sibling or ""))
        comparisons.append({
            "operator": outcome.operator,
            "hidden_shape": f"hidden shape {numbers[outcome.operator]} of "
                            f"{counts[outcome.operator]}",
            "public_shape": sibling.shape_id if sibling else None,
            "hidden": _floor_figure(outcome, policy), "hidden_state": _state(outcome, policy),
            "public": _floor_figure(sibling, policy) if sibling else None,
            "public_state": _state(sibling, policy) if sibling else None})
    return comparisons


def generalisation_failures(comparisons: Iterable[Mapping[str, Any]],
                            factor: float) -> dict[str, list[dict[str, Any]]]:
    """Per operator, its hidden shapes that show it does not generalise: the comparison
    with `why` ("failed", "fell back", "not evaluated" or "below") and the factor. A hidden
    shape counts only where its sibling earned (passed, scored above 0 or untimed): a
    kernel that fails in public too has nothing to generalise, and the public board shows
    it already."""
    failures: dict[str, list[dict[str, Any]]] = {}
    for comparison in comparisons:
        why = _generalisation_failure(comparison, factor)
        if why is not None:
            failures.setdefault(comparison["operator"], []).append(
                {**comparison, "why": why, "factor": factor})
    return failures


def _generalisation_failure(comparison: Mapping[str, Any], factor: float) -> str | None:
    if comparison.get("public_state") != PASSED:
        return None
    if comparison.get("hidden_state") != PASSED:
        return str(comparison.get("hidden_state"))
    hidden, public = comparison.get("hidden"), comparison.get("public")
    if hidden is not None and public is not None and public > 0 and hidden < public / factor:
        return BELOW
    return None


def generalisation_reason_text(reason: Mapping[str, Any]) -> str:
    """One hidden shape's failure as the boards and the submission page say it."""
    public = reason.get("public")
    sibling = (f"its public sibling {reason.get('public_shape')}: "
               f"{'passed, not timed' if public is None else f'{public:.3f}'}")
    if reason.get("why") == BELOW:
        return (f"{reason.get('hidden_shape')}: {reason.get('hidden'):.3f}, below 1/"
                f"{reason.get('factor'):g} of {sibling}")
    return f"{reason.get('hidden_shape')} {reason.get('why')} (0); {sibling}"


BOARD_REASONS = 3  # hidden shapes a board's badge names; the submission's page names every one


def generalisation_note(reasons: Mapping[str, Sequence[Mapping[str, Any]]] | None,
                        operators: Sequence[str]) -> str:
    """" (why)" after a board's "does not generalise" badge: the first BOARD_REASONS hidden
    shapes that flagged it, each against its public sibling with both figures
    (`generalisation_reason_text`), and how many more the submission's page lists; "" where
    nothing is flagged, or for a score stored before the reasons were (2026-12-04)."""
    flagged = [(op, r) for op in operators for r in (reasons or {}).get(op, ())]
    texts = [f"{op}: {generalisation_reason_text(r)}" for op, r in flagged[:BOARD_REASONS]]
    if len(flagged) > BOARD_REASONS:
        texts.append(f"{len(flagged) - BOARD_REASONS} more on the submission's page")
    return f" ({'; '.join(texts)})" if texts else ""


def _state(outcome: ShapeOutcome, policy: ScoringPolicy) -> str:
    if not outcome.evaluated:
        return NOT_EVALUATED
    if not outcome.correct:
        return FAILED
    return FELL_BACK if shape_score(outcome, policy) == 0 else PASSED


def _floor_figure(outcome: ShapeOutcome, policy: ScoringPolicy) -> float | None:
    """a_floor where the shape earned, 0 where it scores 0, None where it has no time."""
    score = shape_score(outcome, policy)
    return score if not score else outcome.attainment_with_floor


def operators_not_generalising(public: Mapping[str, float | None],
                               hidden: Mapping[str, float | None], factor: float) -> list[str]:
    """The rule before 2026-12-04, for summaries stored before it: operators whose score on
    the hidden shapes is below their public one / `factor` (scores of one kind: `combine`
    passes the medians of a_floor).

    Only where both are known and the public one is above 0: a candidate that scores 0 in
    public has nothing to generalise, and an untimed run has no attainment to compare."""
    flagged = []
    for op, secret in sorted(hidden.items()):
        seen = public.get(op)
        if seen is not None and secret is not None and seen > 0 and secret < seen / factor:
            flagged.append(op)
    return flagged


def attainment_error(attainment: float | None, median_s: float | None,
                     median_se_s: float | None) -> float | None:
    """A shape's attainment error from its time's: a = SOL / T, so se_a = a * se_T / T."""
    if attainment is None or not median_s or median_se_s is None:
        return None
    return attainment * median_se_s / median_s


def operator_standard_error(scored: Sequence[tuple[float, float]]) -> float:
    """S_op's standard error from its shapes' (attainment, standard error): every shape drawn
    around its attainment with its error (never below 0), the median taken, REPLICATES
    times, with a fixed seed."""
    if not any(se > 0 for _, se in scored):
        return 0.0
    values = np.array(scored, dtype=np.float64)
    # a normal draw with scale 0 is its mean exactly: exact shapes stay where they are
    draws = np.random.default_rng(SEED).normal(values[:, 0], values[:, 1],
                                               size=(REPLICATES, len(values)))
    medians = np.median(np.maximum(draws, 0.0), axis=1)
    return float(medians.std()) if np.ptp(medians) > 0 else 0.0


def _operator_error(operator: str, scores: Mapping[str, float | None],
                    errors: Mapping[str, float | None] | None) -> float | None:
    if operator not in scores:
        return 0.0  # no candidate: 0, and certainly so
    return None if errors is None else errors.get(operator)


def _weighted_error(scores: Mapping[str, float | None], errors: Mapping[str, float | None] | None,
                    weights: Mapping[str, float]) -> float | None:
    """sqrt(sum (w_op * se_op)^2): operators are evaluated apart, so their errors are
    independent; None when any weighted operator's error is unknown."""
    total = 0.0
    for op, weight in weights.items():
        if weight <= 0 or op not in scores:  # no candidate for it: 0, and certainly so
            continue
        error = None if errors is None else errors.get(op)
        if error is None:
            return None
        total += (weight * error) ** 2
    return math.sqrt(total)


def _interval(score: float | None, error: float | None) -> list[float] | None:
    if score is None or error is None:
        return None
    return [max(0.0, score - INTERVAL_Z * error), score + INTERVAL_Z * error]


def solve_rate(operator_results: Iterable[Sequence[ShapeOutcome]]) -> float:
    """Share of teams whose candidate for an operator is correct and native on every shape."""
    attempts = [list(shapes) for shapes in operator_results]
    solved = sum(bool(s) and all(o.correct and o.verdict == NATIVE for o in s) for s in attempts)
    return solved / len(attempts) if attempts else 0.0


def _floor_by_operator(outcomes: Iterable[ShapeOutcome],
                       policy: ScoringPolicy) -> dict[str, float | None]:
    """Per operator, the median of a_floor over the shapes (0 where the shape scores 0)."""
    grouped: dict[str, list[float | None]] = {}
    for outcome in outcomes:
        grouped.setdefault(outcome.operator, []).append(_floor_figure(outcome, policy))
    return {op: operator_score(values) for op, values in grouped.items()}


def _by_operator(outcomes: Iterable[ShapeOutcome], policy: ScoringPolicy,
                 keep: Callable[[ShapeOutcome], bool]
                 ) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """S_op per operator over the kept shapes, and each one's standard error."""
    grouped: dict[str, list[tuple[float | None, float | None]]] = {}
    for outcome in outcomes:
        if keep(outcome):
            score = shape_score(outcome, policy)
            # a 0 (failed, fallback) is certain; an attainment's error is what was measured
            error = outcome.attainment_se if score else 0.0
            grouped.setdefault(outcome.operator, []).append((score, error))
    scores = {op: operator_score(s for s, _ in shapes) for op, shapes in grouped.items()}
    errors: dict[str, float | None] = {}
    for op, shapes in grouped.items():
        known = [(s, e) for s, e in shapes if s is not None and e is not None]
        errors[op] = operator_standard_error(known) \
            if scores[op] is not None and len(known) == len(shapes) else None
    return scores, errors
