"""import_release: the fixture release into the catalog, idempotently, hidden parts apart."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluation.catalog.importing import release_import
from evaluation.catalog.models import HardwareProfile, Operator, OperatorHidden, Release, Shape
from evaluation.harness.release import ReleaseError
from tests.hidden_tier import hidden_tier_release
from tests.paths import FIXTURE_RELEASE

pytestmark = pytest.mark.django_db


def test_it_imports_operators_shapes_hidden_parts_and_hardware() -> None:
    summary = release_import(path=FIXTURE_RELEASE)
    assert summary.created and summary.release.version == 1
    assert (summary.operators, summary.shapes) == (6, 45)
    assert Operator.objects.count() == 6 and Shape.objects.count() == 45
    rms = Operator.objects.get(name="rms_norm")
    assert "class Model" in rms.reference_py and "_make_inputs" in rms.input_py
    assert "roofline" not in rms.shapes_json and "semantic_W_flops" not in rms.reference_py
    hidden = OperatorHidden.objects.get(operator=rms)
    assert hidden.metadata["id"] == "fixture_001"
    assert "semantic_W_flops" in json.dumps(hidden.roofline)
    assert summary.release.hidden.importance["causal_attention"]["importance_score"] > 0
    assert set(HardwareProfile.objects.values_list("name", flat=True)) == {"H200", "H100", "H20",
                                                                           "MI300X"}
    assert HardwareProfile.objects.get(name="H200").queue == "eval.H200"


def test_importing_the_same_content_again_changes_nothing() -> None:
    release_import(path=FIXTURE_RELEASE)
    again = release_import(path=FIXTURE_RELEASE)
    assert not again.created and Release.objects.count() == 1 and Shape.objects.count() == 45


def test_a_changed_release_becomes_a_new_version(tmp_path: Path) -> None:
    release_import(path=FIXTURE_RELEASE)
    copy = tmp_path / "atrex-fixture"
    shutil.copytree(FIXTURE_RELEASE, copy)
    shapes_path = copy / "data" / "rms_norm" / "shapes.json"
    shapes = json.loads(shapes_path.read_text())
    shapes["extra"] = {"init_kwargs": {"eps": 1e-6}, "input_kwargs": {"num_tokens": 2,
                                                                      "hidden_size": 64}}
    shapes_path.write_text(json.dumps(shapes))
    roofline_path = copy / "data" / "rms_norm" / "roofline.json"
    roofline = json.loads(roofline_path.read_text())
    roofline["shapes"]["extra"] = roofline["shapes"]["dev-t4-h256"]
    roofline_path.write_text(json.dumps(roofline))
    summary = release_import(path=copy)
    assert summary.created and summary.release.version == 2 and summary.shapes == 46
    assert Release.objects.count() == 2


def test_a_broken_release_stores_nothing(tmp_path: Path) -> None:
    copy = tmp_path / "broken"
    shutil.copytree(FIXTURE_RELEASE, copy)
    (copy / "data" / "gemm_fp16" / "shapes.json").write_text("{")
    with pytest.raises(ReleaseError):
        release_import(path=copy)
    assert Release.objects.count() == 0 and Operator.objects.count() == 0


def test_the_command_prints_a_summary_and_reports_errors(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    call_command("import_release", str(FIXTURE_RELEASE))
    assert "imported atrex-fixture v1 — 6 operators, 45 shapes" in capsys.readouterr().out
    with pytest.raises(CommandError, match="release not imported: data/: missing"):
        call_command("import_release", str(tmp_path))


def test_a_release_with_a_hidden_tier_is_imported_with_it_counted_apart(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The hidden shapes are stored (every tier) and counted apart: the public count is the
    one a page shows; importing the same content again changes nothing."""
    target = hidden_tier_release(tmp_path)
    call_command("import_release", str(target))
    assert "6 operators, 45 shapes (+2 hidden)" in capsys.readouterr().out
    assert Shape.objects.count() == 45 and Shape.every_tier.count() == 47
    again = release_import(path=target)
    assert not again.created and again.shapes == 45 and again.hidden_shapes == 2
