"""Import and check_release on the whole layout: every field, every omission, every defect."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluation.catalog.models import HardwareProfile, Operator, Release, Shape
from evaluation.harness.release import DEFAULT_ATOL, DEFAULT_RTOL
from leaderboard.models import WeightSet
from tests.paths import FIXTURE_RELEASE

pytestmark = pytest.mark.django_db

REFERENCE = '''import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, scale: float, bias: float = 0.0) -> None:
        super().__init__()
        self.scale, self.bias = scale, bias

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        y = x.float() * self.scale + self.bias
        return {"y": y.to(x.dtype), "total": y.sum(dim=-1)}
'''
INPUT = '''import torch


def _make_inputs(rows: int, cols: int = 8) -> dict[str, torch.Tensor]:
    return {"x": torch.randn(rows, cols, dtype=torch.bfloat16)}
'''
BARE_REFERENCE = '''import torch
from torch import nn


class Model(nn.Module):
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a * 2
'''
BARE_INPUT = '''import torch


def _make_inputs(**sizes: int) -> dict[str, torch.Tensor]:
    return {"a": torch.randn(sizes["n"])}
'''


def write_json(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))


def synthetic_release(root: Path) -> Path:
    """Two operators: `full` uses every field of the layout, `bare` omits every optional one."""
    full = root / "data" / "full"
    full.mkdir(parents=True)
    (full / "reference.py").write_text(REFERENCE)
    (full / "input.py").write_text(INPUT)
    write_json(full / "shapes.json", {
        "dev-r3": {"init_kwargs": {"scale": 2.0}, "input_kwargs": {"rows": 3}},
        "prod-r4096": {"init_kwargs": {"scale": 0.5, "bias": 1.0},
                       "input_kwargs": {"rows": 4096, "cols": 4096}},
    })
    write_json(full / "metadata.json", {
        "id": "syn_001", "status": "trace_reference", "dtype": "bf16",
        "input_dtypes": {"x": "bf16"}, "output_dtypes": {"y": "bf16", "total": "fp32"},
        "origin": {"framework": "vllm", "symbol": "Scale", "module": "vllm.layers.scale"},
        "phase": "prefill/decode", "importance_score": 0.7,
        "tolerance": {"atol": 0.01, "rtol": 0.02},
        "shapes": {
            "dev-r3": {"description": "dev"},
            "prod-r4096": {"description": "prefill", "origin_kernel": "scale_kernel",
                           "source_repo": "vllm-project/vllm",
                           "production_performance": {
                               "H200": {"framework": "vllm", "performance_us": 12.5},
                               "H100": {"framework": "sglang", "performance_us": 15.0}}},
        },
    })
    write_json(full / "roofline.json", {"shapes": {
        "dev-r3": {"semantic_W_flops": {"fp32": 48}, "semantic_Q_read_bytes": 48,
                   "semantic_Q_write_bytes": 60, "SOL_time_ms": {"H200": None}},
        "prod-r4096": {"semantic_W_flops": {"fp8_e4m3": 2 ** 30, "bf16": 2 ** 20, "fp32": 2 ** 25},
                       "semantic_Q_read_bytes": 2 ** 25, "semantic_Q_write_bytes": 2 ** 25,
                       "SOL_time_ms": {"H200": 0.01, "MI300X": None}},
    }})
    bare = root / "data" / "bare"
    bare.mkdir(parents=True)
    (bare / "reference.py").write_text(BARE_REFERENCE)
    (bare / "input.py").write_text(BARE_INPUT)
    write_json(bare / "shapes.json", {"dev-n5": {"init_kwargs": None, "input_kwargs": {"n": 5}},
                                      "n1024": {"input_kwargs": {"n": 1024}}})
    write_json(bare / "metadata.json", {"id": "syn_002", "dtype": "fp32"})
    write_json(bare / "roofline.json", {"shapes": {
        sid: {"semantic_W_flops": {}, "semantic_Q_read_bytes": 4 * n,
              "semantic_Q_write_bytes": 4 * n} for sid, n in (("dev-n5", 5), ("n1024", 1024))}})
    write_json(root / "data" / "operator_importance.json", {
        "metadata": {"num_profiles": 2, "frameworks": ["vllm", "sglang"]},
        "operators": {"full": {"importance_score": 3.0, "phase": "prefill/decode",
                               "num_profiles": 2},
                      "bare": {"importance_score": 1.0}}})
    hardware = root / "configs" / "hardware"
    hardware.mkdir(parents=True)
    shutil.copy(FIXTURE_RELEASE / "configs" / "hardware" / "H200.yaml", hardware / "H200.yaml")
    (hardware / "MINI.yaml").write_text(  # no arch, no source, only the paths it must have
        "hardware: {name: MINI}\n"
        "p_peak: {bf16_tc: 100000000000000, fp16_tc: 100000000000000,\n"
        "         fp8_e4m3_tc: 200000000000000, fp32_strict: 10000000000000}\n"
        "b_peak: {hbm: 1000000000000}\n")
    return root


def test_a_release_with_every_field_and_every_omission_imports_and_checks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = synthetic_release(tmp_path / "synthetic")
    call_command("import_release", str(root))
    out = capsys.readouterr().out
    assert "imported synthetic v1 — 2 operators, 4 shapes, hardware: H200, MINI" in out
    release = Release.objects.get(name="synthetic")
    weights = WeightSet.objects.get(release=release, active=True).weights
    assert weights == {"full": 0.75, "bare": 0.25}
    full = Operator.objects.get(release=release, name="full").hidden
    assert full.atol == 0.01 and full.metadata["shapes"]["prod-r4096"]["production_performance"]
    bare = Operator.objects.get(release=release, name="bare").hidden
    assert (bare.atol, bare.rtol) == (DEFAULT_ATOL, DEFAULT_RTOL)  # no tolerance: defaults
    assert HardwareProfile.objects.get(name="MINI").arch == ""
    call_command("check_release", "synthetic")
    out = capsys.readouterr().out
    assert "2 operators, 4 shapes, 2 dev-tier references run, 0 problems" in out


Breakage = Callable[[Path], None]


def _rewrite(path: str, change: Callable[[dict], None]) -> Breakage:  # type: ignore[type-arg]
    def apply(root: Path) -> None:
        doc = json.loads((root / path).read_text())
        change(doc)
        (root / path).write_text(json.dumps(doc))
    return apply


MALFORMED: dict[str, tuple[Breakage, str]] = {
    "missing file": (lambda root: (root / "data/full/input.py").unlink(),
                     "data/full/input.py: missing public file"),
    "bad JSON": (lambda root: (root / "data/bare/shapes.json").write_text('{"n1": '),
                 "data/bare/shapes.json: line 1: invalid JSON"),
    "input signature mismatch": (
        _rewrite("data/full/shapes.json",
                 lambda d: d["dev-r3"]["input_kwargs"].update(colums=4)),
        "data/full/shapes.json: dev-r3.input_kwargs.colums: not a parameter of _make_inputs"),
    "init signature mismatch": (
        _rewrite("data/full/shapes.json", lambda d: d["dev-r3"].update(init_kwargs={})),
        "data/full/shapes.json: dev-r3.init_kwargs: missing scale, required by Model.__init__"),
    "unknown dtype key": (
        _rewrite("data/bare/roofline.json",
                 lambda d: d["shapes"]["n1024"].update(semantic_W_flops={"fp4": 10})),
        "data/bare/roofline.json: shapes.n1024.semantic_W_flops.fp4: unknown dtype key"),
    "precision path missing on a hardware profile": (
        _rewrite("data/bare/roofline.json",
                 lambda d: d["shapes"]["n1024"].update(semantic_W_flops={"fp8_e5m2": 10})),
        "configs/hardware (MINI): p_peak.fp8_e5m2_tc: missing, needed by "
        "data/bare/roofline.json shapes.n1024"),
    "roofline id missing": (
        _rewrite("data/full/roofline.json", lambda d: d["shapes"].pop("prod-r4096")),
        "data/full/roofline.json: shapes.prod-r4096: missing"),
    "shape id mismatch": (
        _rewrite("data/full/metadata.json",
                 lambda d: d["shapes"].update({"prod-r4069": {"description": "typo"}})),
        "data/full/metadata.json: shapes.prod-r4069: no such shape id in shapes.json"),
}


@pytest.mark.parametrize("defect", sorted(MALFORMED))
def test_a_malformed_release_names_file_and_field_and_stores_nothing(
        defect: str, tmp_path: Path) -> None:
    root = synthetic_release(tmp_path / "synthetic")
    call_command("import_release", str(FIXTURE_RELEASE))
    before = (Release.objects.count(), Shape.objects.count(), WeightSet.objects.count(),
              HardwareProfile.objects.count())
    breakage, message = MALFORMED[defect]
    breakage(root)
    with pytest.raises(CommandError) as error:
        call_command("import_release", str(root))
    assert message in str(error.value)
    assert (Release.objects.count(), Shape.objects.count(), WeightSet.objects.count(),
            HardwareProfile.objects.count()) == before


def test_check_release_runs_what_the_loader_cannot_see(tmp_path: Path) -> None:
    root = synthetic_release(tmp_path / "synthetic")
    # forward takes `a`, but _make_inputs now returns `b`: only running it shows that.
    (root / "data/bare/input.py").write_text(BARE_INPUT.replace('{"a":', '{"b":'))
    # and the reference now returns fp32 where metadata promises bf16.
    (root / "data/full/reference.py").write_text(REFERENCE.replace("y.to(x.dtype)", "y"))
    call_command("import_release", str(root))
    with pytest.raises(CommandError) as error:
        call_command("check_release", "synthetic")
    text = str(error.value)
    assert "data/bare/shapes.json: n1024: _make_inputs returns ['b'], Model.forward takes ['a']" \
        in text
    assert "data/full/shapes.json: dev-r3: output y is torch.float32, metadata.json says " \
           "torch.bfloat16" in text
    with pytest.raises(CommandError, match="no imported release named 'nope'"):
        call_command("check_release", "nope")


def test_input_keys_are_checked_where_input_py_names_the_device(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The public Atrex-Bench writes device='cuda' in input.py. Its shapes are still built on
    the meta device (on a machine without a GPU), so a wrong input key is found in every
    shape, not only in a dev tier the public release does not have."""
    root = synthetic_release(tmp_path / "synthetic")
    # no dev tier, as in the public release: a dev shape must run on this CPU
    _rewrite("data/bare/shapes.json", lambda d: d.pop("dev-n5"))(root)
    _rewrite("data/bare/roofline.json", lambda d: d["shapes"].pop("dev-n5"))(root)
    cuda_input = ('import torch\n\n\ndef _make_inputs(**sizes: int) -> dict[str, torch.Tensor]:\n'
                  '    a = torch.randn(sizes["n"], dtype=torch.bfloat16, device="cuda").cuda()\n'
                  '    return {"a": a.to("cuda", torch.float32) * 0.5}\n')
    (root / "data/bare/input.py").write_text(cuda_input)
    call_command("import_release", str(root))
    call_command("check_release", "synthetic")
    assert "could not be built on the meta device" not in capsys.readouterr().out

    (root / "data/bare/input.py").write_text(cuda_input.replace('{"a":', '{"b":'))
    call_command("import_release", str(root))
    with pytest.raises(CommandError) as error:
        call_command("check_release", "synthetic")
    assert "data/bare/shapes.json: n1024: _make_inputs returns ['b'], Model.forward takes " \
           "['a']" in str(error.value)


def test_the_fixture_release_passes_check_release(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("import_release", str(FIXTURE_RELEASE))
    call_command("check_release", "atrex-fixture")
    assert "6 operators, 45 shapes, 12 dev-tier references run, 0 problems" in \
        capsys.readouterr().out


def test_check_release_accepts_what_public_releases_do(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Seen in the public Atrex-Bench: a forward parameter with a default that _make_inputs
    leaves out, output dtypes written as alternatives ("bf16/fp16"), tuple outputs."""
    root = synthetic_release(tmp_path / "synthetic")
    (root / "data/bare/reference.py").write_text(BARE_REFERENCE.replace(
        "def forward(self, a: torch.Tensor)", "def forward(self, a: torch.Tensor, bias=None)")
        .replace("return a * 2", "return (a * 2, a.sum())"))
    _rewrite("data/bare/metadata.json", lambda d: d.update(
        output_dtypes={"out": "fp32/bf16", "total": "fp32"}))(root)
    call_command("import_release", str(root))
    call_command("check_release", "synthetic")
    assert "2 dev-tier references run, 0 problems" in capsys.readouterr().out


def test_tuple_outputs_are_compared_by_position() -> None:
    import torch

    from evaluation.harness.compare import as_output_dict, compare_outputs

    ones, twos = torch.ones(3), torch.full((3,), 2.0)
    assert as_output_dict((ones, twos)) == {"out0": ones, "out1": twos}
    assert as_output_dict((ones, "not a tensor")) is None
    result = compare_outputs(as_output_dict((ones, ones)), as_output_dict((ones, twos)), 0, 0)
    assert not result.passed and result.worst_output == "out1"


def test_check_release_names_the_versions_there_are_for_an_unknown_one() -> None:
    call_command("import_release", str(FIXTURE_RELEASE))
    with pytest.raises(CommandError, match=r"release 'atrex-fixture' has no version 7 "
                                           r"\(imported versions: 1\)"):
        call_command("check_release", "atrex-fixture", "--release-version", "7")
    with pytest.raises(CommandError, match="no imported release named 'nope'"):
        call_command("check_release", "nope", "--release-version", "1")


def _device_report(path: Path, error_on: tuple[str, str] | None = None,
                   skip: tuple[str, str] | None = None) -> Path:
    """A device report of the fixture release as a GPU host's check writes it."""
    from evaluation.harness.release_check import DeviceCheck, ShapeOnDevice

    shapes = [ShapeOnDevice(op, shape.shape_id, input_bytes=1 << 20, peak_bytes=4 << 20,
                            seconds=0.001)
              for op, shape in ((s.operator.name, s) for s in Shape.objects.select_related("operator"))
              if (op, shape.shape_id) != skip]
    for row in shapes:
        if (row.operator, row.shape_id) == error_on:
            row.error, row.seconds = "out of memory", None
    path.write_text(json.dumps(DeviceCheck("NVIDIA H200", 140 << 30, shapes).to_dict()))
    return path


def test_check_release_fails_on_a_shape_whose_reference_cannot_run_on_the_gpu(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("import_release", str(FIXTURE_RELEASE))
    fine = _device_report(tmp_path / "fine.json")
    call_command("check_release", "atrex-fixture", "--device-report", str(fine))
    total = Shape.objects.count()
    assert f"NVIDIA H200: {total} of {total} shapes' references run" in capsys.readouterr().out
    shape = Shape.objects.filter(operator__name="gemm_fp16").order_by("position").last()
    assert shape is not None
    oom = _device_report(tmp_path / "oom.json", error_on=("gemm_fp16", shape.shape_id))
    with pytest.raises(CommandError, match=f"gemm_fp16/shapes.json: {shape.shape_id}: the "
                                           "reference cannot run on NVIDIA H200"):
        call_command("check_release", "atrex-fixture", "--device-report", str(oom))


def test_check_release_refuses_a_device_report_of_other_shapes(tmp_path: Path) -> None:
    call_command("import_release", str(FIXTURE_RELEASE))
    partial = _device_report(tmp_path / "partial.json", skip=("rms_norm", "dev-t4-h256"))
    with pytest.raises(CommandError, match=r"the report is not of atrex-fixture v1: 1 of its "
                                           r"shapes missing \[\('rms_norm', 'dev-t4-h256'\)\]"):
        call_command("check_release", "atrex-fixture", "--device-report", str(partial))
    (tmp_path / "other.json").write_text('{"format": "atrex.evaluation-result/1"}')
    with pytest.raises(CommandError, match="not a device report"):
        call_command("check_release", "atrex-fixture", "--device-report",
                     str(tmp_path / "other.json"))
