"""The submissions tests' shared fixtures: one queued job of an honest rms_norm upload; the
fixture release evaluated on its dev tier (two shapes per operator), weights active."""

from __future__ import annotations

from typing import Any

import pytest

from evaluation.catalog.models import HardwareProfile, Release
from leaderboard.services import weight_set_from_release
from submissions.models import EvaluationJob
from submissions.services import submission_create
from tests.factories import TeamFactory
from tests.paths import SAMPLE_CANDIDATES
from tests.world import import_fixture_release


@pytest.fixture
def job() -> EvaluationJob:
    release = import_fixture_release()
    submission = submission_create(
        team=TeamFactory(), user=None, release=release,
        hardware=HardwareProfile.objects.get(name="H200"), filename="rms_norm.py",
        data=(SAMPLE_CANDIDATES / "rms_norm" / "triton_native.py").read_bytes())
    job = submission.candidates.get().job
    EvaluationJob.objects.filter(pk=job.pk).update(attempts=1)  # as dispatch_job would
    job.refresh_from_db()
    return job


@pytest.fixture
def dev_release(settings: Any) -> Release:
    settings.ATREX_SHAPE_FILTER = "dev-*"
    release = import_fixture_release()
    weight_set_from_release(release)
    return release
