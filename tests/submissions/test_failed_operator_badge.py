"""An operator whose job ended with every shape failed is not shown with a green "scored"."""

from __future__ import annotations

import pytest
from django.test import Client

from evaluation.catalog.models import HardwareProfile, Shape
from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission
from tests.factories import TeamFactory, member_of
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def test_a_job_whose_every_shape_failed_is_badged_failed_and_a_passing_one_scored() -> None:
    release = import_fixture_release()
    team = TeamFactory()
    user = member_of(team, "amber")
    submission = Submission.objects.create(team=team, release=release,
                                           hardware=HardwareProfile.objects.get(name="H200"))
    for name, status in (("rms_norm", "failed"), ("silu_and_mul", "passed")):
        operator = release.operators.get(name=name)
        job = EvaluationJob.objects.create(
            candidate=Candidate.objects.create(submission=submission, operator=operator,
                                               source="class Model: pass", sha256="0" * 64),
            status="scored", attempts=1)
        for shape in Shape.objects.filter(operator=operator)[:2]:
            ShapeResult.objects.create(job=job, attempt=1, shape=shape, status=status, raw={})
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    headings = {name: page.split(f"<h2>{name} ")[1].split("</h2>")[0]
                for name in ("rms_norm", "silu_and_mul")}
    assert "scored: every shape failed" in headings["rms_norm"]
    assert 'class="badge failed"' in headings["rms_norm"]
    assert 'class="badge scored">scored<' in headings["silu_and_mul"]
    assert "every shape failed" not in headings["silu_and_mul"]
