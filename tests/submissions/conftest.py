"""The submissions tests' shared fixture: one queued job of an honest rms_norm upload."""

from __future__ import annotations

import pytest

from evaluation.catalog import release_import
from evaluation.models import HardwareProfile
from submissions.models import EvaluationJob
from submissions.services import submission_create
from tests.conftest import FIXTURE_RELEASE, SAMPLE_CANDIDATES
from tests.factories import TeamFactory


@pytest.fixture
def job() -> EvaluationJob:
    release = release_import(path=FIXTURE_RELEASE).release
    submission = submission_create(
        team=TeamFactory(), user=None, release=release,
        hardware=HardwareProfile.objects.get(name="H200"), filename="rms_norm.py",
        data=(SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes())
    job = submission.candidates.get().job
    EvaluationJob.objects.filter(pk=job.pk).update(attempts=1)  # as dispatch_job would
    job.refresh_from_db()
    return job
