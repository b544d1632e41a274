"""Recorded GPU results for the embedded default, stored as the portal stores any job's report,
so a first visit sees real boards instead of empty ones. Three sets, each from the project's
own runs on one H200:

- the fixture release's sample candidates in each DSL (below);
- the starter release's reference baselines, eager and torch.compile
  (`benchmarks/starter_baselines.py`, 2026-11-30; eager forwards were then scored by their
  profiled busy time, which issue 24 replaced: their provenance says so);
- the public Atrex-Bench release's PyTorch-eager baseline after the timing change
  (`benchmarks/public_baseline.py`, 2026-12-02), when the public release is imported
  (`setup_demo --public-release PATH`; the release lives outside this repository);
- with it, the expert ladder (open kernel libraries' adapters, the best open kernel per
  operator and the torch.compile baseline; leaderboard/ladder.py) from the results file
  `benchmarks/library_ladder.py` wrote on an H200 (LADDER_RESULTS). Until that file is in
  the repository those rows are left out, and setup_demo says so.

Every stored result carries its provenance (`raw["recorded"]`: GPU, date, evaluator, source
file), which every page showing it prints (leaderboard/selectors.recorded_sources).

The source is `benchmarks/dsl_samples.py`'s JSON of 2026-12-02 (one H200; docs/integrity-gpu.md):
per case and shape the status, verdict, DSL ratio and scored time. Each DSL becomes a team of
its own ("Triton samples", "Gluon samples", "CuTe DSL samples"), and the dishonest samples a
team "Shortcut samples", each a ranked submission on the H200 profile whose jobs cover the
recorded shapes only (`EvaluationJob.shape_ids`). The portal computes SOL and attainment from
the recorded time (`submissions.results.store_shape`) and scores them; the submission's notes
say where they came from too. Idempotent: a team or baseline that exists is left as it is.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from evaluation.baselines import baseline_source
from evaluation.catalog.models import HardwareProfile, Release
from evaluation.catalog.selectors import DEV_TIER
from leaderboard.ladder import ladder_store
from leaderboard.models import WeightSet
from leaderboard.services import rescore_submission, weight_set_activate, weight_set_create
from portal.accounts.models import Team
from submissions.environment import submission_environment_update
from submissions.models import Candidate, EvaluationJob, Submission
from submissions.results import store_shape
from submissions.services import baseline_team

REPO = Path(settings.BASE_DIR)
RESULTS = REPO / "benchmarks" / "results" / "h200-2026-12-02"
# the CuTe DSL cases as re-run after dsl.credit_compiled, the others from the first run
RECORDED = (RESULTS / "dsl-samples.json", RESULTS / "dsl-samples-cute.json")
SAMPLES = REPO / "evaluation" / "sample_candidates"
STARTER_BASELINES = REPO / "benchmarks" / "results" / "h200-2026-11-30" / "baselines.json"
PUBLIC_BASELINE = RESULTS / "baseline-rederived.sqlite3"
# The expert ladder's H200 run (benchmarks/library_ladder.py --json ...): absent until a GPU
# run's file is committed here
LADDER_RESULTS = REPO / "benchmarks" / "results" / "h200-library-ladder" / "ladder.json"
EVALUATOR_LADDER = "evaluator of issue 44 (benchmarks/library_ladder.py)"
# Operator weights derived from a Llama-3.1-8B profiler trace on one H200 (make_llama_trace.py)
LLAMA_TRACE_WEIGHTS = REPO / "benchmarks" / "results" / "h200-2026-11-30" / \
    "llama3.1-8b-h200-weights.json"
# The fixture's operators are small copies of the starter's, under other names
FIXTURE_NAME_OF = {"linear_bf16": "gemm_fp16", "varlen_prefill_attention": "causal_attention"}

# What measured them, as every page using them prints it (recorded_sources)
EVALUATOR_2026_12_02 = "evaluator of 2026-12-02 (docs/measurement.md)"
EVALUATOR_2026_11_30 = ("evaluator of 2026-11-30 (eager forwards then scored by profiled busy "
                        "time, since replaced: docs/measurement.md)")


def provenance(gpu: str, date: str, evaluator: str, source: str) -> dict[str, str]:
    """The `raw["recorded"]` of a recorded result."""
    return {"gpu": gpu, "date": date, "evaluator": evaluator, "source": source}


@dataclass(frozen=True)
class RecordedFile:
    team: str
    operator: str
    dsl: str
    sample: str
    shapes: list[dict[str, Any]]
    environment: dict[str, Any] | None
    source: str


TEAM_OF_CASE = {
    "rms_norm triton": "Triton samples",
    "rms_norm gluon": "Gluon samples", "silu_and_mul gluon": "Gluon samples",
    "gemm_fp16 gluon": "Gluon samples",
    "rms_norm cute": "CuTe DSL samples", "silu_and_mul cute": "CuTe DSL samples",
    "gemm_fp16 cute": "CuTe DSL samples",
    "gemm_fp16 cute calling torch.matmul": "Shortcut samples",
    "rms_norm gluon file, plain Triton kernel": "Shortcut samples",
    "silu_and_mul Triton file declared CuTe DSL": "Shortcut samples",
}


def recorded_files(paths: tuple[Path, ...] = RECORDED) -> list[RecordedFile]:
    """The fixture cases of the recorded runs, the later run's where a case is in both."""
    cases: dict[str, dict[str, Any]] = {}
    for path in paths:
        for row in json.loads(path.read_text()):
            if row["case"] in TEAM_OF_CASE and row["outcome"].get("shapes"):
                cases[row["case"]] = {**row, "source": str(path.relative_to(REPO))}
    files = []
    for name, row in cases.items():
        operator = str(row["sample"]).split("/")[0]
        # The runs took a dev-tier shape of gemm_fp16 too; no board scores the dev tier.
        scored = [s for s in row["outcome"]["shapes"]
                  if not fnmatch.fnmatchcase(str(s["shape"]), DEV_TIER)]
        files.append(RecordedFile(team=TEAM_OF_CASE[name], operator=operator, dsl=row["dsl"],
                                  sample=row["sample"], shapes=scored,
                                  environment=row["outcome"].get("environment"),
                                  source=row["source"]))
    return files


def load_recorded_results(release: Release) -> list[str]:
    """Store the recorded results on `release` (the fixture release); the teams created."""
    hardware = HardwareProfile.objects.get(name="H200")
    by_team: dict[str, list[RecordedFile]] = {}
    for recorded in recorded_files():
        by_team.setdefault(recorded.team, []).append(recorded)
    created = []
    for team_name, files in sorted(by_team.items()):
        slug = team_name.lower().replace(" ", "-")
        if Team.objects.filter(slug=slug).exists():
            continue
        with transaction.atomic():
            team = Team.objects.create(name=team_name, slug=slug)
            submission = Submission.objects.create(
                team=team, release=release, hardware=hardware, agent="sample candidates",
                notes="Recorded on one NVIDIA H200, 2026-12-02 (benchmarks/dsl_samples.py); "
                      "loaded by setup_demo, not evaluated here.")
            for recorded in files:
                _store_file(submission, recorded)
        submission_environment_update(submission.pk)  # stored outside a job's life cycle
        rescore_submission(submission)
        created.append(team_name)
    return created


def _store_file(submission: Submission, recorded: RecordedFile) -> None:
    job = _recorded_job(submission, submission.release.operators.get(name=recorded.operator),
                        (SAMPLES / recorded.sample).read_text(),
                        [str(s["shape"]) for s in recorded.shapes],
                        worker="recorded: H200, 2026-12-02", dsl=recorded.dsl)
    for shape in recorded.shapes:
        store_shape(job, _report(shape, recorded))


def _report(shape: dict[str, Any], recorded: RecordedFile) -> dict[str, Any]:
    """A shape report in the harness's form from the recorded summary of one."""
    median_s = shape["median_us"] * 1e-6 if shape.get("median_us") else None
    return {
        "shape_id": str(shape["shape"]), "status": shape["status"],
        "stage_reached": "performance" if median_s else "adoption",
        "error": shape.get("error") or None,
        "adoption": {"verdict": shape.get("verdict"), "dsl_ratio": shape.get("dsl_ratio"),
                     "dsl_kernels": shape.get("dsl_kernels") or [],
                     "foreign_kernels": [_foreign(text) for text in shape.get("foreign") or []],
                     "notes": shape.get("notes") or []},
        "timing": {"measured": median_s is not None, "median_s": median_s,
                   "method": shape.get("method") or ""},
        "environment": recorded.environment,
        "recorded": provenance("NVIDIA H200", "2026-12-02", EVALUATOR_2026_12_02,
                               recorded.source),
    }


def _foreign(text: str) -> dict[str, Any]:
    """'name (vendor)' or 'name (other DSL: triton)', as dsl_samples.py wrote them."""
    name, _, label = text.rpartition(" (")
    label = label.rstrip(")")
    if label.startswith("other DSL: "):
        return {"name": name, "category": "other-dsl", "dsl": label[len("other DSL: "):],
                "count": 0}
    return {"name": name or text, "category": label or "recorded", "count": 0}


def load_recorded_starter_baselines(release: Release,
                                    path: Path = STARTER_BASELINES) -> list[str]:
    """The starter release's eager and torch.compile baselines as recorded on the H200
    (benchmarks/starter_baselines.py --json), as the portal's baseline submissions: shown
    beside its boards, never ranked. The baselines stored; one that exists is left."""
    data = json.loads(path.read_text())
    meta, source = data["meta"], str(path.relative_to(REPO))
    hardware = HardwareProfile.objects.get(name="H200")
    team = baseline_team()
    stored = []
    for kind, operators in data["results"].items():
        if _recorded_baseline(release, hardware, kind).exists():
            continue
        with transaction.atomic():
            submission = Submission.objects.create(
                team=team, release=release, hardware=hardware, baseline=kind, agent="portal",
                notes=f"{Submission.Baseline(kind).label} of {release}, recorded on one "
                      f"{meta['device']}, {meta['date']} ({source}); loaded by setup_demo.")
            for operator_name, recorded in operators.items():
                operator = release.operators.filter(name=operator_name).first()
                if operator is None:
                    continue  # an operator this release version no longer has
                job = _recorded_job(submission, operator, baseline_source(
                    operator.reference_py, kind), [str(s["shape"]) for s in recorded["shapes"]],
                    worker=f"recorded: H200, {meta['date']}")
                for shape in recorded["shapes"]:
                    store_shape(job, _baseline_report(shape, kind, provenance(
                        meta["device"], meta["date"], EVALUATOR_2026_11_30, source)))
        submission_environment_update(submission.pk)  # stored outside a job's life cycle
        rescore_submission(submission)
        stored.append(Submission.Baseline(kind).label)
    return stored


def load_recorded_public_baseline(release: Release, path: Path = PUBLIC_BASELINE) -> bool:
    """The public Atrex-Bench release's PyTorch-eager baseline after the timing change:
    the portal database the 2026-12-02 run left (benchmarks/public_baseline.py), whose
    reports are stored again here as they were reported. False when it is loaded already."""
    hardware = HardwareProfile.objects.get(name="H200")
    if _recorded_baseline(release, hardware, Submission.Baseline.PYTORCH).exists():
        return False
    source = str(path.relative_to(REPO))
    recorded = provenance("NVIDIA H200", "2026-12-02", EVALUATOR_2026_12_02, source)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute(
            "select o.name, c.source, r.raw from submissions_shaperesult r"
            " join submissions_evaluationjob j on j.id = r.job_id"
            " join submissions_candidate c on c.id = j.candidate_id"
            " join evaluation_operator o on o.id = c.operator_id"
            " where r.attempt = j.attempts order by o.name, r.id").fetchall()
    by_operator: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for name, candidate_source, raw in rows:
        by_operator.setdefault(name, (candidate_source, []))[1].append(json.loads(raw))
    with transaction.atomic():
        submission = Submission.objects.create(
            team=baseline_team(), release=release, hardware=hardware,
            baseline=Submission.Baseline.PYTORCH, agent="portal",
            notes=f"PyTorch reference of {release}, recorded on one NVIDIA H200, 2026-12-02 "
                  f"({source}; docs/baselines.md); loaded by setup_demo.")
        for name, (candidate_source, reports) in by_operator.items():
            operator = release.operators.filter(name=name).first()
            if operator is None:
                continue
            job = _recorded_job(submission, operator, candidate_source,
                                [str(r["shape_id"]) for r in reports],
                                worker="recorded: H200, 2026-12-02")
            for report in reports:
                store_shape(job, {**report, "recorded": recorded})
    submission_environment_update(submission.pk)  # stored outside a job's life cycle
    rescore_submission(submission)
    return True


def load_recorded_ladder(release: Release, path: Path = LADDER_RESULTS) -> list[str] | None:
    """The expert ladder's recorded rows on `release` (the public release): each library's
    row, the best open kernel and the torch.compile baseline, as leaderboard/ladder.py stores
    them; what was stored, one line each. None when the results file is absent: then no
    ladder row is shown (nothing is made up in its place)."""
    if not path.is_file():
        return None
    results = json.loads(path.read_text())
    meta = results.get("meta") or {}
    hardware = HardwareProfile.objects.get(name=str(meta.get("hardware") or "H200"))
    source = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
    return ladder_store(release=release, hardware=hardware, results=results,
                        recorded=provenance(f"NVIDIA {hardware.name}", str(meta.get("date", "")),
                                            EVALUATOR_LADDER, source))


def trace_weights_for_fixture(release: Release) -> WeightSet | None:
    """A second weight version for the fixture release, so "what changed" has two to
    compare: the Llama-3.1-8B trace's weights on the operators the fixture has (its
    linear and prefill attention under the fixture's names; an operator the trace never
    ran gets 0), activated as an admin would. None when it exists already."""
    if release.weight_sets.filter(source=WeightSet.Source.TRACES).exists():
        return None
    trace = json.loads(LLAMA_TRACE_WEIGHTS.read_text())
    names = set(release.operators.values_list("name", flat=True))
    weights = {name: 0.0 for name in names}
    for operator, weight in trace.items():
        name = FIXTURE_NAME_OF.get(operator, operator)
        if name in names:
            weights[name] = float(weight)
    weight_set = weight_set_create(
        release=release, weights=weights, source=str(WeightSet.Source.TRACES),
        note="Llama-3.1-8B trace on one H200, 2026-11-30 "
             f"({LLAMA_TRACE_WEIGHTS.relative_to(REPO)}), on the fixture's operators")
    weight_set_activate(weight_set=weight_set, actor=None)
    return weight_set


def _recorded_baseline(release: Release, hardware: HardwareProfile, kind: str) -> Any:
    """The recorded baselines of `kind` already stored (their jobs' worker says "recorded")."""
    return Submission.objects.filter(release=release, hardware=hardware, baseline=kind,
                                     candidates__job__worker__startswith="recorded: ")


def _recorded_job(submission: Submission, operator: Any, source: str, shape_ids: list[str],
                  worker: str, dsl: str = "") -> EvaluationJob:
    """The candidate and its ended job that recorded results are stored under."""
    candidate = Candidate.objects.create(
        submission=submission, operator=operator, source=source,
        sha256=hashlib.sha256(source.encode()).hexdigest(), dsl=dsl)
    return EvaluationJob.objects.create(
        candidate=candidate, status=EvaluationJob.Status.SCORED, attempts=1,
        mode=EvaluationJob.Mode.GPU, shape_ids=shape_ids, shapes_total=len(shape_ids),
        shapes_done=len(shape_ids), worker=worker)


def _baseline_report(shape: dict[str, Any], kind: str,
                     recorded: dict[str, str]) -> dict[str, Any]:
    """A shape report in the harness's form from starter_baselines.py's summary of one."""
    median_s = shape["median_us"] * 1e-6 if shape.get("median_us") else None
    return {
        "shape_id": str(shape["shape"]), "status": shape["status"],
        "stage_reached": "performance" if median_s else "correctness",
        "error": shape.get("error") or None,
        "adoption": {"verdict": shape.get("verdict"), "dsl_ratio": None, "dsl_kernels": [],
                     "foreign_kernels": [], "notes": []},
        "timing": {"measured": median_s is not None, "median_s": median_s,
                   "method": "eager" if kind == "pytorch" else ""},
        "recorded": recorded,
    }
