"""evaluate_baselines: the release's references as two baseline submissions, outside quotas."""

from __future__ import annotations

import shutil
import types
from pathlib import Path
from unittest import mock

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluation.baselines import PYTORCH, TORCH_COMPILE, baseline_source
from evaluation.catalog.importing import release_import
from evaluation.catalog.models import HardwareProfile
from evaluation.harness.operator_files import candidate_model_class
from portal.audit.models import AuditEntry
from submissions.models import EvaluationJob, Submission
from tests.conftest import FIXTURE_RELEASE

pytestmark = pytest.mark.django_db


def test_the_command_queues_both_baselines_for_every_operator(
        django_capture_on_commit_callbacks: object, capsys: pytest.CaptureFixture[str]) -> None:
    release = release_import(path=FIXTURE_RELEASE).release
    with mock.patch("submissions.jobs.dispatch_job") as dispatch, \
            django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
        call_command("evaluate_baselines", "atrex-fixture", "--hardware", "H200")
    baselines = Submission.objects.filter(release=release).exclude(baseline="")
    assert sorted(baselines.values_list("baseline", flat=True)) == [PYTORCH, TORCH_COMPILE]
    assert all(s.team.hidden for s in baselines)
    jobs = EvaluationJob.objects.filter(candidate__submission__in=baselines)
    assert jobs.count() == 12 and dispatch.call_count == 12
    eager = baselines.get(baseline=PYTORCH).candidates.get(operator__name="rms_norm")
    assert eager.source == eager.operator.reference_py
    assert "queued on eval.H200" in capsys.readouterr().out
    assert AuditEntry.objects.filter(action="baselines.create").count() == 1
    with pytest.raises(CommandError, match="no hardware profile 'B300'"):
        call_command("evaluate_baselines", "atrex-fixture", "--hardware", "B300")


def test_the_compiled_baseline_is_judged_on_its_model_new() -> None:
    reference = (FIXTURE_RELEASE / "data" / "rms_norm" / "reference.py").read_text()
    module = types.ModuleType("candidate")
    exec(compile(baseline_source(reference, TORCH_COMPILE), "candidate.py", "exec"),  # noqa: S102
         module.__dict__)
    chosen = candidate_model_class(module)
    assert chosen.__name__ == "ModelNew" and issubclass(chosen, module.Model)
    with pytest.raises(ValueError, match="unknown baseline"):
        baseline_source(reference, "tensorrt")


def test_the_command_queues_only_the_baselines_named(
        django_capture_on_commit_callbacks: object) -> None:
    release = release_import(path=FIXTURE_RELEASE).release
    with mock.patch("submissions.jobs.dispatch_job") as dispatch, \
            django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
        call_command("evaluate_baselines", "atrex-fixture", "--hardware", "H200",
                     "--kinds", PYTORCH)
    baselines = Submission.objects.filter(release=release).exclude(baseline="")
    assert list(baselines.values_list("baseline", flat=True)) == [PYTORCH]
    assert dispatch.call_count == 6
    with pytest.raises(CommandError, match=r"unknown baselines \['tensorrt'\]"):
        call_command("evaluate_baselines", "atrex-fixture", "--hardware", "H200",
                     "--kinds", "pytorch,tensorrt")
    assert Submission.objects.filter(release=release).exclude(baseline="").count() == 1


def test_a_release_without_an_h200_profile_is_evaluated_on_one_after_import_hardware(
        tmp_path: Path, django_capture_on_commit_callbacks: object,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The public Atrex-Bench brings only its own SKUs (XPU-A, XPU-B): imported alone, it had no
    H200 to be evaluated on until the project's profiles were stored."""
    root = tmp_path / "upstream-like"
    shutil.copytree(FIXTURE_RELEASE, root)
    for path in (root / "configs" / "hardware").glob("*.yaml"):
        if path.stem != "H20":
            path.unlink()
    call_command("import_release", str(root))
    with pytest.raises(CommandError, match=r"no hardware profile 'H200' \(known: H20\); "
                                           r"`manage.py import_hardware` stores"):
        call_command("evaluate_baselines", "upstream-like", "--hardware", "H200")
    call_command("import_hardware")
    out = capsys.readouterr().out
    assert "H200: stored as v1 (queue eval.H200)" in out and "H20: already stored (v1)" in out
    assert HardwareProfile.objects.get(name="H200").versions.get().note.startswith(
        "created from the project's profiles")
    with mock.patch("submissions.jobs.dispatch_job") as dispatch, \
            django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
        call_command("evaluate_baselines", "upstream-like", "--hardware", "H200",
                     "--kinds", PYTORCH)
    assert dispatch.call_count == 6
    call_command("import_hardware")  # again: nothing changes
    assert "H200: already stored (v1), unchanged" in capsys.readouterr().out
    assert HardwareProfile.objects.get(name="H200").version == 1
