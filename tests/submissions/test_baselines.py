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
from tests.paths import FIXTURE_RELEASE
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db


def test_the_command_queues_both_baselines_for_every_operator(
        django_capture_on_commit_callbacks: object, capsys: pytest.CaptureFixture[str]) -> None:
    release = import_fixture_release()
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
    release = import_fixture_release()
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


def test_on_a_portal_whose_workers_have_no_gpu_the_baselines_take_the_dev_tier(
        django_capture_on_commit_callbacks: object, capsys: pytest.CaptureFixture[str],
        settings: object) -> None:
    settings.ATREX_SHAPE_FILTER = ""  # type: ignore[attr-defined]
    import_fixture_release()
    with mock.patch("submissions.jobs.dispatch_job"), \
            django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
        call_command("evaluate_baselines", "atrex-fixture", "--hardware", "H200",
                     "--kinds", PYTORCH)
    scored = EvaluationJob.objects.get(candidate__operator__name="rms_norm")
    assert all(not s.startswith("dev-") for s in scored.shape_ids)  # no history: scored tier
    # the hardware's workers then evaluate in the interpreter
    EvaluationJob.objects.update(mode=EvaluationJob.Mode.INTERPRETER, status="scored")
    with mock.patch("submissions.jobs.dispatch_job"), \
            django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
        call_command("evaluate_baselines", "atrex-fixture", "--hardware", "H200",
                     "--kinds", PYTORCH)
    out = capsys.readouterr().out
    assert "the dev tier ('dev-*'): the workers of H200 last evaluated in Triton's CPU " \
           "interpreter" in out
    assert "queued on eval.H200.low" in out
    newest = EvaluationJob.objects.filter(candidate__operator__name="rms_norm").latest("pk")
    assert newest.shape_ids and all(s.startswith("dev-") for s in newest.shape_ids)


def test_the_release_version_is_said_and_can_be_chosen(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = import_fixture_release()
    copy = tmp_path / "atrex-fixture"
    shutil.copytree(FIXTURE_RELEASE, copy)
    (copy / "data" / "rms_norm" / "reference.py").write_text(
        (copy / "data" / "rms_norm" / "reference.py").read_text() + "\n# v2\n")
    second = release_import(path=copy).release
    assert (first.version, second.version) == (1, 2)
    with mock.patch("submissions.jobs.dispatch_job"):
        call_command("evaluate_baselines", "atrex-fixture", "--hardware", "H200",
                     "--kinds", PYTORCH, "--release-version", "1")
    assert "release: atrex-fixture v1 (also imported: v2; --release-version picks another)" in \
        capsys.readouterr().out
    assert Submission.objects.exclude(baseline="").get().release == first
    with pytest.raises(CommandError, match="has no version 7"):
        call_command("evaluate_baselines", "atrex-fixture", "--hardware", "H200",
                     "--release-version", "7")
