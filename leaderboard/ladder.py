"""The expert ladder on the boards: open kernel libraries as unranked baseline rows.

`benchmarks/library_ladder.py` evaluates each adapter (evaluation/library_candidates: an
operator's Model calling one library) on a GPU through the harness and writes one JSON file:
per package its version and, per operator, the shapes as the worker reports them; then the
release's torch.compile baseline on the operators time allowed. `ladder_store` stores them as
the portal stores any report (SOL and attainment from the release's hidden roofline):

- one baseline submission per package (`Submission.Baseline.LIBRARY`, "flag-gems 5.0.2" in
  its `agent`), one job per operator;
- the best of them per operator (the higher S_op; on a tie the package named first in the
  file) as one "best open kernel" submission (`Submission.Baseline.BEST_OPEN`), its results
  copied from the library's, its notes naming which package each operator came from;
- the torch.compile baseline where none is stored yet.

Baselines are never ranked and score their attainment whatever their verdict
(leaderboard/services._policy). Idempotent: what is stored already is left as it is.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from evaluation.catalog.models import HardwareProfile, Operator, Release
from leaderboard.models import ScoreSummary
from leaderboard.services import rescore_submission
from submissions.environment import submission_environment_update
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from submissions.results import store_shape
from submissions.services import baseline_team

REPO = Path(settings.BASE_DIR)
RECORDED_WORKER = "recorded: "


def ladder_store(*, release: Release, hardware: HardwareProfile, results: dict[str, Any],
                 recorded: dict[str, str]) -> list[str]:
    """Store a ladder results file's rows on `release`; what was stored, one line each.
    `recorded` is the provenance every stored result carries (raw["recorded"])."""
    stored = []
    for package, entry in results.get("libraries", {}).items():
        name = f"{package} {entry.get('version') or '?'}"
        if _recorded(release, hardware, Submission.Baseline.LIBRARY).filter(agent=name).exists():
            continue
        submission = _store_rows(release, hardware, Submission.Baseline.LIBRARY, name,
                                 entry.get("operators", {}), recorded,
                                 f"{name}'s kernels through the adapters in "
                                 "evaluation/library_candidates")
        stored.append(f"{name} ({submission.candidates.count()} operators)")
    compiled = results.get("torch_compile") or {}
    if compiled and not _recorded(release, hardware, Submission.Baseline.TORCH_COMPILE).exists():
        run = sum(1 for name in compiled if release.operators.filter(name=name).exists())
        submission = _store_rows(release, hardware, Submission.Baseline.TORCH_COMPILE, "portal",
                                 compiled, recorded, "the release's references under "
                                 f"torch.compile (default mode), on {run} of its "
                                 f"{release.operators.count()} operators (the others were "
                                 "not run and count 0)")
        stored.append(f"torch.compile reference ({submission.candidates.count()} operators)")
    best = best_open_build(release=release, hardware=hardware)
    if best is not None:
        stored.append(f"best open kernel ({best.candidates.count()} operators)")
    return stored


def best_open_build(*, release: Release, hardware: HardwareProfile) -> Submission | None:
    """The best library per operator, as one baseline submission (None when it exists
    already, or no library row does)."""
    if Submission.objects.filter(release=release, hardware=hardware,
                                 baseline=Submission.Baseline.BEST_OPEN).exists():
        return None
    libraries = list(Submission.objects.filter(release=release, hardware=hardware,
                                               baseline=Submission.Baseline.LIBRARY)
                     .order_by("pk"))
    if not libraries:
        return None
    scores = {pk: (summary or {}).get("by_operator", {}) for pk, summary in ScoreSummary.objects
              .filter(submission__in=libraries).values_list("submission_id", "summary")}
    chosen: dict[str, tuple[float, Submission, Candidate]] = {}
    for library in libraries:
        for candidate in library.candidates.select_related("operator"):
            value = scores.get(library.pk, {}).get(candidate.operator.name)
            value = float(value) if value is not None else -1.0
            best = chosen.get(candidate.operator.name)
            if best is None or value > best[0]:
                chosen[candidate.operator.name] = (value, library, candidate)
    lines = [f"{op}: {library.agent} (S_op {value:.3f})" if value >= 0 else
             f"{op}: {library.agent}" for op, (value, library, _) in sorted(chosen.items())]
    with transaction.atomic():
        best_open = Submission.objects.create(
            team=baseline_team(), release=release, hardware=hardware,
            baseline=Submission.Baseline.BEST_OPEN, agent="open libraries",
            notes="Best open kernel per operator, from the library rows beside this board: "
                  + "; ".join(lines))
        for _, _library, candidate in chosen.values():
            _copy_candidate(best_open, candidate)
    submission_environment_update(best_open.pk)  # stored outside a job's life cycle
    rescore_submission(best_open)
    return best_open


def _store_rows(release: Release, hardware: HardwareProfile, kind: str, agent: str,
                operators: dict[str, Any], recorded: dict[str, str], what: str) -> Submission:
    with transaction.atomic():
        submission = Submission.objects.create(
            team=baseline_team(), release=release, hardware=hardware, baseline=kind,
            agent=agent, notes=f"{what}; recorded on one {recorded.get('gpu', 'GPU')}, "
                               f"{recorded.get('date', '')} ({recorded.get('source', '')}); "
                               "loaded by setup_demo, not evaluated here.")
        for name, entry in sorted(operators.items()):
            operator = release.operators.filter(name=name).first()
            if operator is None:
                continue  # an operator this release version does not have
            reports = entry.get("shapes") or []
            job = _recorded_job(submission, operator, _source(entry, operator, kind),
                                [str(r["shape_id"]) for r in reports],
                                worker=f"{RECORDED_WORKER}{recorded.get('gpu', '')}, "
                                       f"{recorded.get('date', '')}")
            for report in reports:
                store_shape(job, {**report, "recorded": recorded})
    submission_environment_update(submission.pk)  # stored outside a job's life cycle
    rescore_submission(submission)
    return submission


def _source(entry: dict[str, Any], operator: Operator, kind: str) -> str:
    """The candidate's source as evaluated: the adapter file the results name (this
    repository's copy), or the reference under torch.compile."""
    if kind == Submission.Baseline.TORCH_COMPILE:
        from evaluation.baselines import TORCH_COMPILE, baseline_source

        return baseline_source(operator.reference_py, TORCH_COMPILE)
    path = REPO / str(entry.get("source_file") or "")
    return path.read_text() if entry.get("source_file") and path.is_file() else \
        f"# the adapter file {entry.get('source_file')!r} is not in this checkout\n"


def _copy_candidate(submission: Submission, candidate: Candidate) -> None:
    """The candidate, its job and its latest results, as reported, under `submission`."""
    job = candidate.job if hasattr(candidate, "job") else None
    if job is None:
        return
    copy = _recorded_job(submission, candidate.operator, candidate.source, list(job.shape_ids),
                         worker=job.worker)
    for result in ShapeResult.every_tier.filter(job=job, attempt=job.attempts):
        if result.raw:
            store_shape(copy, dict(result.raw))


def _recorded_job(submission: Submission, operator: Operator, source: str,
                  shape_ids: list[str], worker: str) -> EvaluationJob:
    candidate = Candidate.objects.create(
        submission=submission, operator=operator, source=source,
        sha256=hashlib.sha256(source.encode()).hexdigest())
    return EvaluationJob.objects.create(
        candidate=candidate, status=EvaluationJob.Status.SCORED, attempts=1,
        mode=EvaluationJob.Mode.GPU, shape_ids=shape_ids, shapes_total=len(shape_ids),
        shapes_done=len(shape_ids), worker=worker)


def _recorded(release: Release, hardware: HardwareProfile, kind: str) -> Any:
    return Submission.objects.filter(release=release, hardware=hardware, baseline=kind,
                                     candidates__job__worker__startswith=RECORDED_WORKER)
