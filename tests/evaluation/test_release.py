"""Release loading: the fixture release loads; malformed files name file and field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evaluation.harness.release import (
    ReleaseError,
    load_hardware_profile,
    load_release,
    project_hardware_profiles,
)
from tests.paths import FIXTURE_RELEASE

OPERATORS = {"rms_norm", "fused_add_rms_norm", "silu_and_mul", "gemm_fp16",
             "topk_softmax_gating", "causal_attention"}


@pytest.fixture
def release_copy(tmp_path: Path) -> Path:
    target = tmp_path / "release"
    shutil.copytree(FIXTURE_RELEASE, target)
    return target


def test_it_loads_the_fixture_release_with_public_and_hidden_parts() -> None:
    release = load_release(FIXTURE_RELEASE)
    assert set(release.operators) == OPERATORS
    assert release.warnings == ()
    for op in release.operators.values():
        assert op.metadata is not None and op.roofline is not None
        assert {s.id for s in op.public.shapes} == set(op.roofline)
        assert sum(s.id.startswith("dev-") for s in op.public.shapes) == 2
    assert set(release.importance) == OPERATORS
    assert set(release.hardware) == {"H200", "H100", "H20", "MI300X"}
    assert release.settings.dsl == "triton" and release.settings.dsl_ratio_threshold == 0.95


def test_it_loads_the_projects_hardware_profiles() -> None:
    profiles = project_hardware_profiles()
    assert set(profiles) == {"H200", "H100", "H20", "MI300X"}
    h200 = profiles["H200"]
    assert h200.peak_flops["bf16_tc"] == 989e12
    assert h200.hbm_bytes_per_s == 4.8e12
    assert h200.ridge_point("bf16_tc") == pytest.approx(206.04, rel=1e-3)


def test_it_names_file_and_line_of_invalid_json(release_copy: Path) -> None:
    (release_copy / "data" / "rms_norm" / "shapes.json").write_text('{"a": ')
    with pytest.raises(ReleaseError) as caught:
        load_release(release_copy)
    assert caught.value.file == "data/rms_norm/shapes.json"
    assert "line 1" in caught.value.field and "invalid JSON" in str(caught.value)


def test_it_names_the_shape_field_that_is_missing(release_copy: Path) -> None:
    path = release_copy / "data" / "gemm_fp16" / "shapes.json"
    shapes = json.loads(path.read_text())
    first = next(iter(shapes))
    del shapes[first]["input_kwargs"]
    path.write_text(json.dumps(shapes))
    with pytest.raises(ReleaseError, match=f"data/gemm_fp16/shapes.json: {first}.input_kwargs"):
        load_release(release_copy)


def test_it_rejects_an_unknown_w_dtype(release_copy: Path) -> None:
    path = release_copy / "data" / "rms_norm" / "roofline.json"
    doc = json.loads(path.read_text())
    shape = next(iter(doc["shapes"]))
    doc["shapes"][shape]["semantic_W_flops"] = {"fp4": 10}
    path.write_text(json.dumps(doc))
    with pytest.raises(ReleaseError, match=rf"shapes.{shape}.semantic_W_flops.fp4: unknown dtype"):
        load_release(release_copy)


def test_a_roofline_file_without_compute_overlap_adds_compute_times(release_copy: Path) -> None:
    path = release_copy / "data" / "causal_attention" / "roofline.json"
    doc = json.loads(path.read_text())
    del doc["compute_overlap"]  # as in Atrex-Bench's own files
    path.write_text(json.dumps(doc))
    roofline = load_release(release_copy).operator("causal_attention").roofline
    assert roofline is not None
    assert {s.compute_overlap for s in roofline.values()} == {"sum"}


def test_the_fixture_declares_that_units_overlap() -> None:
    roofline = load_release(FIXTURE_RELEASE).operator("causal_attention").roofline
    assert roofline is not None
    assert {s.compute_overlap for s in roofline.values()} == {"max"}


def test_it_rejects_an_unknown_compute_overlap(release_copy: Path) -> None:
    path = release_copy / "data" / "rms_norm" / "roofline.json"
    doc = json.loads(path.read_text())
    doc["compute_overlap"] = "overlap"
    path.write_text(json.dumps(doc))
    with pytest.raises(ReleaseError,
                       match="data/rms_norm/roofline.json: compute_overlap: must be one of"):
        load_release(release_copy)


def test_it_requires_id_and_dtype_in_metadata(release_copy: Path) -> None:
    path = release_copy / "data" / "silu_and_mul" / "metadata.json"
    doc = json.loads(path.read_text())
    del doc["dtype"]
    path.write_text(json.dumps(doc))
    with pytest.raises(ReleaseError, match="data/silu_and_mul/metadata.json: dtype"):
        load_release(release_copy)


def test_it_requires_reference_model_and_make_inputs(release_copy: Path) -> None:
    (release_copy / "data" / "rms_norm" / "input.py").write_text("def make(): pass\n")
    with pytest.raises(ReleaseError, match="data/rms_norm/input.py: _make_inputs"):
        load_release(release_copy)


def test_public_only_operators_load_without_hidden_files(release_copy: Path) -> None:
    for op in (release_copy / "data").iterdir():
        if op.is_dir():
            (op / "metadata.json").unlink()
            (op / "roofline.json").unlink()
    release = load_release(release_copy)
    assert not release.has_hidden_files
    assert release.operator("rms_norm").tolerance.atol == 1e-2


def test_it_warns_about_importance_for_unknown_operators(release_copy: Path) -> None:
    path = release_copy / "data" / "operator_importance.json"
    doc = json.loads(path.read_text())
    doc["operators"]["no_such_op"] = {"importance_score": 0.1}
    path.write_text(json.dumps(doc))
    release = load_release(release_copy)
    assert any("no_such_op" in w for w in release.warnings)
    assert "no_such_op" not in release.importance


def test_hardware_profile_errors_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "X.yaml"
    path.write_text("hardware: {name: X}\np_peak: {bf16_tc: 1}\nb_peak: {hbm: -5}\n")
    with pytest.raises(ReleaseError, match="b_peak.hbm"):
        load_hardware_profile(path)


def test_an_unknown_operator_lists_the_known_ones() -> None:
    release = load_release(FIXTURE_RELEASE)
    with pytest.raises(ReleaseError, match="no such operator.*rms_norm"):
        release.operator("nope")


def test_the_fixture_roofline_files_are_what_the_derivation_script_writes(
        release_copy: Path) -> None:
    import subprocess
    import sys

    script = FIXTURE_RELEASE.parents[1] / "release_tools" / "make_fixture_roofline.py"
    subprocess.run([sys.executable, str(script), str(release_copy)], check=True,
                   capture_output=True, timeout=120)
    for op in (FIXTURE_RELEASE / "data").iterdir():
        if op.is_dir():
            committed = (op / "roofline.json").read_text()
            assert (release_copy / "data" / op.name / "roofline.json").read_text() == committed


def _hide_a_shape(release: Path, operator: str = "rms_norm",
                  hidden_id: str = "hidden-t512-h4096") -> dict:  # type: ignore[type-arg]
    """Add one hidden shape, with its roofline entry (a public shape's W and Q, rescaled
    nowhere: the loader checks ids and calls, not the numbers)."""
    directory = release / "data" / operator
    public = json.loads((directory / "shapes.json").read_text())
    template_id, template = next(iter(public.items()))
    (directory / "hidden_shapes.json").write_text(json.dumps({hidden_id: template}))
    roofline = json.loads((directory / "roofline.json").read_text())
    roofline["shapes"][hidden_id] = roofline["shapes"][template_id]
    (directory / "roofline.json").write_text(json.dumps(roofline))
    return roofline


def test_a_hidden_tier_loads_beside_the_public_shapes_and_never_joins_them(
        release_copy: Path) -> None:
    _hide_a_shape(release_copy)
    release = load_release(release_copy)
    op = release.operator("rms_norm")
    assert [s.id for s in op.hidden_shapes] == ["hidden-t512-h4096"]
    assert "hidden-t512-h4096" not in {s.id for s in op.public.shapes}  # what GPU hosts get
    assert "hidden-t512-h4096" in (op.roofline or {})
    assert release.hidden_shape_count == 1
    assert load_release(FIXTURE_RELEASE).hidden_shape_count == 0


def test_a_hidden_shape_needs_an_id_of_its_own_a_valid_call_and_its_roofline(
        release_copy: Path) -> None:
    directory = release_copy / "data" / "rms_norm"
    public_id = next(iter(json.loads((directory / "shapes.json").read_text())))
    roofline = _hide_a_shape(release_copy, hidden_id=public_id)
    with pytest.raises(ReleaseError, match="hidden_shapes.json.*needs an id of its own"):
        load_release(release_copy)
    (directory / "hidden_shapes.json").write_text(json.dumps(
        {"hidden-x": {"input_kwargs": {"no_such_argument": 1}}}))
    roofline["shapes"]["hidden-x"] = roofline["shapes"][public_id]
    (directory / "roofline.json").write_text(json.dumps(roofline))
    with pytest.raises(ReleaseError, match="hidden_shapes.json.*hidden-x.input_kwargs"):
        load_release(release_copy)
    _hide_a_shape(release_copy, hidden_id="hidden-y")
    del roofline["shapes"]["hidden-x"]
    (directory / "roofline.json").write_text(json.dumps(roofline))  # hidden-y has no W and Q
    with pytest.raises(ReleaseError, match="roofline.json.*hidden-y"):
        load_release(release_copy)
