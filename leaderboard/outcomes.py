"""What scoring reads, once per release: operators, the shapes jobs evaluate, phases, each
shape's regime per hardware, and each submission's shape outcomes. Reads only: boards
(leaderboard/selectors.py) and the rescore (leaderboard/services.py, which writes what is
computed from them) share it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from django.db.models import F

from evaluation.catalog.models import HardwareProfile, Operator, Release, Shape
from evaluation.catalog.selectors import DEV_TIER, SCORED_TIER, evaluated_shape_ids
from evaluation.catalog.siblings import public_sibling
from evaluation.harness import roofline
from evaluation.harness.release import ShapeRoofline
from evaluation.harness.results import UNVERIFIED_ON_CPU
from leaderboard.scoring import BALANCED, COMPUTE, MEMORY, ShapeOutcome, attainment_error
from submissions.models import EvaluationJob, ShapeResult, Submission

DEV_PREFIX = DEV_TIER.rstrip("*")  # "dev-": the dev tier's ids start with it


class ScoringContext:
    """Per release, read once: operators, the shapes jobs evaluate, phases, regimes per
    hardware."""

    def __init__(self, release: Release) -> None:
        self.release = release
        self.operators = {op.pk: op for op in Operator.objects.filter(release=release)
                          .select_related("hidden")}
        self.names = sorted(op.name for op in self.operators.values())
        self.operator_ids = {op.name: op.pk for op in self.operators.values()}
        self.phases = {op.name: _operator_metadata(op).get("phase") for op in self.operators.values()}
        self.shape_phases = {(op.name, shape_id): (meta or {}).get("phase")
                             for op in self.operators.values()
                             for shape_id, meta in (_operator_metadata(op).get("shapes") or {}).items()}
        # The shapes this deployment evaluates: what a job without its own list covers.
        self.shape_ids = {op.name: evaluated_shape_ids(op) for op in self.operators.values()}
        # The release's scored tier, whatever this deployment evaluates: which operators a
        # regime or phase board spans. With the deployment's filter a CPU portal (dev-*) saw
        # only tiny memory-bound shapes, and every compute-bound board was empty, recorded
        # GPU results and baselines included.
        self.scored_shape_ids = {op.name: evaluated_shape_ids(op, SCORED_TIER)
                                 for op in self.operators.values()}
        # Filled by outcomes_by_submission: submissions with a job still queued or running,
        # and per submission the jobs lost to an infrastructure failure and those run in
        # Triton's CPU interpreter.
        self.running: set[int] = set()
        self.lost_jobs: dict[int, int] = {}
        self.interpreter_jobs: dict[int, int] = {}
        # Filled by outcomes_by_submission too, for the boards' aggregates: per submission,
        # per declared DSL, its latest public results [files, shapes, correct, native,
        # unverified-cpu]; the recorded results' sources; the operators it has a job for.
        self.tallies: dict[int, dict[str, list[int]]] = {}
        self.recorded: dict[int, set[str]] = {}
        self.job_operators: dict[int, set[str]] = {}
        # per submission and operator: its latest public results [scored tier, dev tier]
        self.coverage: dict[int, dict[str, list[int]]] = {}
        self._regimes: dict[tuple[str, str, str], str | None] = {}
        self._subsets: dict[str, dict[str, set[str]]] = {}
        self._calls: dict[str, dict[str, dict[str, Any]]] | None = None
        self._siblings: dict[tuple[str, str, tuple[str, ...]], str | None] = {}

    def regime(self, operator: Operator, shape_id: str, hardware: HardwareProfile) -> str | None:
        key = (operator.name, shape_id, hardware.name)
        if key not in self._regimes:
            self._regimes[key] = shape_regime(operator, shape_id, hardware)
        return self._regimes[key]

    def sibling(self, operator: str, hidden_id: str, public_ids: Sequence[str]) -> str | None:
        """The public shape (of `public_ids`, those the job covers) a hidden shape is compared
        with (evaluation/catalog/siblings.py); read once per release, chosen once per job kind."""
        key = (operator, hidden_id, tuple(public_ids))
        if key not in self._siblings:
            if self._calls is None:
                self._calls = {}
                for name, shape_id, init, inputs in Shape.every_tier.filter(
                        operator__release=self.release).values_list(
                        "operator__name", "shape_id", "init_kwargs", "input_kwargs"):
                    self._calls.setdefault(name, {})[shape_id] = {"init_kwargs": init,
                                                                  "input_kwargs": inputs}
            calls = self._calls.get(operator, {})
            self._siblings[key] = None if hidden_id not in calls else public_sibling(
                hidden_id, calls[hidden_id], {i: calls[i] for i in public_ids if i in calls})
        return self._siblings[key]

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
            "infrastructure_failure", "shape_ids", "mode", "hidden_shape_ids",
            "candidate__dsl")}
        results: dict[int, dict[str, tuple[Any, ...]]] = {pk: {} for pk in jobs}
        public: dict[int, list[int]] = {}  # per job: [shapes, correct, native, unverified]
        recorded: dict[int, set[str]] = {}  # per job
        rows = (ShapeResult.every_tier.filter(**{f"job__{k}": v for k, v in which.items()},
                                           attempt=F("job__attempts"))
                .values_list("job_id", "shape__shape_id", "status", "verdict", "attainment",
                             "suspicious", "median_s", "median_se_s", "attainment_with_floor",
                             "shape__hidden", "raw__recorded")
                .iterator(chunk_size=20000))
        for job_id, shape_id, *result, secret_shape, source in rows:
            results[job_id][shape_id] = tuple(result)
            if not secret_shape:  # what the boards' public counts see (ShapeResult.objects)
                counts = public.setdefault(job_id, [0, 0, 0, 0, 0])
                counts[4] += shape_id.startswith(DEV_PREFIX)
                passed = result[0] == "passed"
                counts[0] += 1
                counts[1] += passed
                counts[2] += passed and result[1] == "native"
                counts[3] += passed and result[1] == UNVERIFIED_ON_CPU
                if isinstance(source, dict):
                    recorded.setdefault(job_id, set()).add(recorded_source(source))
        self.running, self.lost_jobs, self.interpreter_jobs = set(), {}, {}
        self.tallies = {pk: {} for pk in grouped}
        self.recorded = {pk: set() for pk in grouped}
        self.job_operators = {pk: set() for pk in grouped}
        self.coverage = {pk: {} for pk in grouped}
        for job_id, (submission_id, operator_id, status, infrastructure, shape_ids,
                     mode, hidden_ids, dsl) in jobs.items():
            if submission_id not in grouped:
                continue
            self.job_operators[submission_id].add(self.operators[operator_id].name)
            if job_id in public:
                tally = self.tallies[submission_id].setdefault(dsl, [0, 0, 0, 0, 0])
                tally[0] += 1
                for i, count in enumerate(public[job_id][:4], start=1):
                    tally[i] += count
                shapes, dev = public[job_id][0], public[job_id][4]
                self.coverage[submission_id][self.operators[operator_id].name] = \
                    [shapes - dev, dev]
            self.recorded[submission_id] |= recorded.get(job_id, set())
            if mode == EvaluationJob.Mode.INTERPRETER:
                self.interpreter_jobs[submission_id] = \
                    self.interpreter_jobs.get(submission_id, 0) + 1
            if status not in EvaluationJob.Status.ended():
                self.running.add(submission_id)
            elif status == EvaluationJob.Status.FAILED and infrastructure:
                self.lost_jobs[submission_id] = self.lost_jobs.get(submission_id, 0) + 1
            operator = self.operators[operator_id]
            secret = set(hidden_ids or ())
            public_ids = list(shape_ids or self.shape_ids[operator.name])
            for shape_id in [*public_ids, *(hidden_ids or ())]:
                hidden = shape_id in secret
                sibling = self.sibling(operator.name, shape_id, public_ids) if hidden else None
                reported = results[job_id].get(shape_id)
                kind = self.regime(operator, shape_id, hardware[submission_id])
                phase = self.phase(operator.name, shape_id)
                if reported is None and status not in EvaluationJob.Status.ended():
                    continue  # still to come
                if reported is None:
                    grouped[submission_id].append(ShapeOutcome(
                        operator=operator.name, shape_id=shape_id, correct=False, verdict=None,
                        attainment=0.0, regime=kind, phase=phase, evaluated=False,
                        hidden=hidden, sibling=sibling))
                    continue
                result_status, verdict, value, suspicious, median_s, median_se_s, floor = reported
                grouped[submission_id].append(ShapeOutcome(
                    operator=operator.name, shape_id=shape_id, correct=result_status == "passed",
                    verdict=verdict or None, attainment=value, suspicious=suspicious,
                    regime=kind, phase=phase, hidden=hidden, attainment_with_floor=floor,
                    sibling=sibling,
                    attainment_se=attainment_error(value, median_s, median_se_s)))
        return grouped

    def subset_operators(self, hardware: HardwareProfile) -> dict[str, set[str]]:
        """Which operators have memory-/compute-bound shapes on `hardware`, and which phases,
        among the release's scored tier (not the shapes this deployment happens to evaluate)."""
        if hardware.name not in self._subsets:
            subsets: dict[str, set[str]] = {"memory": set(), "compute": set(), "prefill": set(),
                                            "decode": set()}
            for op in self.operators.values():
                for shape_id in self.scored_shape_ids[op.name]:
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


def recorded_source(recorded: dict[str, Any]) -> str:
    """A recorded result's source as pages print it: "NVIDIA H200, 2026-12-02, evaluator of
    …: path" (leaderboard/demo.py)."""
    return (f"{recorded.get('gpu')}, {recorded.get('date')}, {recorded.get('evaluator')}: "
            f"{recorded.get('source')}")


def scoring_context(release: Release) -> ScoringContext:
    """What scoring reads once per release (boards ask it which subsets have shapes)."""
    return ScoringContext(release)


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
    intensity = roofline.arithmetic_intensity(shape)
    return intensity if math.isfinite(intensity) else None  # no traffic: no point to chart


def shape_regime(operator: Operator, shape_id: str, hardware: HardwareProfile) -> str | None:
    """The shape's regime on `hardware`, by the harness's one definition."""
    shape = _shape_roofline(operator, shape_id)
    return roofline.roofline_point(shape, hardware.as_spec()).regime if shape is not None else None
