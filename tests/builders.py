"""Submissions built straight into the database, as scored as a test needs them: no upload
and no worker (tests/reports.py has those that go through the results consumer)."""

from __future__ import annotations

import hashlib
import io
import zipfile
from datetime import timedelta

from django.utils import timezone

from evaluation.catalog.models import HardwareProfile, Release, Shape
from evaluation.catalog.selectors import evaluated_shape_ids
from leaderboard.services import rescore_submission
from portal.accounts.models import Team
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from submissions.services import submission_create
from tests.factories import TeamFactory
from tests.paths import SAMPLE_CANDIDATES

SHAPES = 3  # results per operator of a scored_kernels submission: the first scored-tier shapes
KERNEL = "import triton\n\nclass Model:\n    def forward(self, x):\n        return x * {factor}\n"


def scored_submission(release: Release, team: Team | str, attainment: dict[str, float],
                      status: str = "passed", dsl: str | dict[str, str] = "triton",
                      verdict: str = "native") -> Submission:
    """A submission whose every shape of each operator reached `attainment[operator]`, its
    files declared in `dsl` (one for all, or per operator); `team`, or a new team of that
    name. Not rescored."""
    if isinstance(team, str):
        team = TeamFactory(name=team)
    submission = Submission.objects.create(team=team, release=release,
                                           hardware=HardwareProfile.objects.get(name="H200"))
    for operator, value in attainment.items():
        op = release.operators.get(name=operator)
        declared = dsl if isinstance(dsl, str) else dsl.get(operator, "triton")
        candidate = Candidate.objects.create(submission=submission, operator=op,
                                             source="class Model: pass", sha256="0" * 64,
                                             dsl=declared)
        job = EvaluationJob.objects.create(candidate=candidate, status="scored", attempts=1)
        for shape in Shape.objects.filter(operator=op):
            ShapeResult.objects.create(job=job, attempt=1, shape=shape, status=status,
                                       verdict=verdict if status == "passed" else "",
                                       attainment=value, raw={})
    return submission


def scored_kernels(team: Team, release: Release,
                   kernels: dict[str, tuple[str, float | list[float] | None]], *,
                   status: str = "passed", verdict: str = "native",
                   seconds: float | list[float] | None = None, hardware: str = "H200",
                   minutes_ago: int = 0) -> Submission:
    """A scored submission: per operator (source, attainment of each of its first SHAPES
    shapes, or one per shape); `seconds`, each shape's median time (or one per shape)."""
    submission = Submission.objects.create(team=team, release=release,
                                           hardware=HardwareProfile.objects.get(name=hardware))
    Submission.objects.filter(pk=submission.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes_ago))
    for name, (source, attainment) in kernels.items():
        operator = release.operators.get(name=name)
        candidate = Candidate.objects.create(
            submission=submission, operator=operator, source=source,
            sha256=hashlib.sha256(source.encode()).hexdigest())
        shape_ids = evaluated_shape_ids(operator)[:SHAPES]
        job = EvaluationJob.objects.create(candidate=candidate, status="scored", attempts=1,
                                           shapes_total=SHAPES, shapes_done=SHAPES,
                                           shape_ids=shape_ids)
        shapes = operator.shapes.filter(shape_id__in=shape_ids).order_by("position")
        for i, shape in enumerate(shapes):
            ShapeResult.objects.create(job=job, attempt=1, shape=shape, status=status,
                                       verdict=verdict if status == "passed" else "",
                                       attainment=_nth(attainment, i), median_s=_nth(seconds, i),
                                       raw={})
    submission.refresh_from_db()  # its created_at as updated above, which the scores copy
    rescore_submission(submission)
    return submission


def _nth(value: float | list[float] | None, i: int) -> float | None:
    return value[i] if isinstance(value, list) else value


def honest_upload(release: Release, operators: tuple[str, ...] = ("rms_norm",)) -> Submission:
    """An upload of honest Triton kernels by a new team, its jobs numbered as dispatch would
    (attempt 1)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in operators:
            archive.writestr(f"{name}.py", (SAMPLE_CANDIDATES / name / "triton_native.py").read_text())
    submission = submission_create(team=TeamFactory(), user=None, release=release,
                                   hardware=HardwareProfile.objects.get(name="H200"),
                                   filename="kernels.zip", data=buffer.getvalue())
    EvaluationJob.objects.filter(candidate__submission=submission).update(attempts=1)
    return submission
