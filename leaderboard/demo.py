"""Recorded GPU results for the embedded default: what the fixture release's sample candidates
in each DSL got on an H200, stored as the portal stores any job's report, so a first visit
sees real boards instead of empty ones.

The source is `benchmarks/dsl_samples.py`'s JSON of 2026-12-02 (one H200; docs/integrity-gpu.md):
per case and shape the status, verdict, DSL ratio and scored time. Each DSL becomes a team of
its own ("Triton samples", "Gluon samples", "CuTe DSL samples"), and the dishonest samples a
team "Shortcut samples", each a ranked submission on the H200 profile whose jobs cover the
recorded shapes only (`EvaluationJob.shape_ids`). The portal computes SOL and attainment from
the recorded time (`submissions.results.store_shape`) and scores them; every stored result
says where it came from (`raw["recorded_from"]`) and the submission's notes say so too.
Idempotent: a team that exists is left as it is.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from evaluation.catalog.models import HardwareProfile, Release
from leaderboard.services import rescore_submission
from portal.accounts.models import Team
from submissions.models import Candidate, EvaluationJob, Submission
from submissions.results import store_shape

REPO = Path(settings.BASE_DIR)
RESULTS = REPO / "benchmarks" / "results" / "h200-2026-12-02"
# the CuTe DSL cases as re-run after dsl.credit_compiled, the others from the first run
RECORDED = (RESULTS / "dsl-samples.json", RESULTS / "dsl-samples-cute.json")
SAMPLES = REPO / "evaluation" / "sample_candidates"


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
        files.append(RecordedFile(team=TEAM_OF_CASE[name], operator=operator, dsl=row["dsl"],
                                  sample=row["sample"], shapes=row["outcome"]["shapes"],
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
        rescore_submission(submission)
        created.append(team_name)
    return created


def _store_file(submission: Submission, recorded: RecordedFile) -> None:
    source = (SAMPLES / recorded.sample).read_text()
    candidate = Candidate.objects.create(
        submission=submission, operator=submission.release.operators.get(name=recorded.operator),
        source=source, sha256=hashlib.sha256(source.encode()).hexdigest(), dsl=recorded.dsl)
    shape_ids = [str(s["shape"]) for s in recorded.shapes]
    job = EvaluationJob.objects.create(
        candidate=candidate, status=EvaluationJob.Status.SCORED, attempts=1,
        mode=EvaluationJob.Mode.GPU, shape_ids=shape_ids, shapes_total=len(shape_ids),
        shapes_done=len(shape_ids), worker="recorded: H200, 2026-12-02")
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
        "recorded_from": recorded.source,
    }


def _foreign(text: str) -> dict[str, Any]:
    """'name (vendor)' or 'name (other DSL: triton)', as dsl_samples.py wrote them."""
    name, _, label = text.rpartition(" (")
    label = label.rstrip(")")
    if label.startswith("other DSL: "):
        return {"name": name, "category": "other-dsl", "dsl": label[len("other DSL: "):],
                "count": 0}
    return {"name": name or text, "category": label or "recorded", "count": 0}
