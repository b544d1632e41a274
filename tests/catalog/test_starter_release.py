"""The project's own starter release: it imports, passes check_release, its W/Q are the
derivation script's, and its hidden tier is drawn at import from the admin's secret, never
tracked in the repository."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluation.catalog.hidden_tier import release_with_generated_tier
from evaluation.catalog.importing import release_content_sha256, release_import
from evaluation.catalog.models import Release, Shape
from evaluation.harness.release import (
    DTYPE_TO_PEAK_PATH,
    HIDDEN_SHAPES_FILE,
    HardwareSpec,
    ShapeRoofline,
    load_release,
    project_hardware_profiles,
)
from evaluation.harness.roofline import roofline_point
from evaluation.release_tools.make_fixture_roofline import write_release_rooflines
from evaluation.release_tools.make_starter_roofline import STARTER_RELEASE, WORK_MODELS
from leaderboard.models import WeightSet

LLM_SERVING_OPERATORS = {
    "rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary_embedding_neox",
    "reshape_and_cache", "paged_decode_attention", "varlen_prefill_attention", "linear_bf16",
    "fp8_per_token_quant", "per_token_group_fp8_quant", "fp8_block_scaled_gemm",
    "fused_moe_bf16", "topk_softmax_gating", "moe_align_block_size", "topk_topp_filter"}


def test_the_starter_release_covers_llm_serving_with_150_to_300_shapes() -> None:
    release = load_release(STARTER_RELEASE)
    assert set(release.operators) == LLM_SERVING_OPERATORS
    shapes = sum(len(op.public.shapes) for op in release.operators.values())
    assert 150 <= shapes <= 300
    for op in release.operators.values():
        ids = [s.id for s in op.public.shapes]
        assert sum(i.startswith("dev-") for i in ids) == 2, op.name
        assert op.metadata is not None and op.roofline is not None
        provenance = op.metadata.raw["provenance"]["models"]
        assert all(m["config"].startswith("https://huggingface.co/") and m["values"]
                   for m in provenance.values()), op.name
        production = {k: v for k, v in op.metadata.raw["shapes"].items()
                      if not k.startswith("dev-")}
        assert production and all("model" in s and "phase" in s for s in production.values())
        # Tensors come from the current default device, never a hard-coded one.
        assert "cuda" not in (op.public.directory / "input.py").read_text(), op.name
    assert release.warnings == ()


def test_the_roofline_files_are_what_the_derivation_script_writes(tmp_path: Path) -> None:
    copy = tmp_path / "atrex-starter"
    shutil.copytree(STARTER_RELEASE, copy)
    write_release_rooflines(copy, WORK_MODELS)
    for op in (STARTER_RELEASE / "data").iterdir():
        if op.is_dir():
            assert json.loads((copy / "data" / op.name / "roofline.json").read_text()) == \
                json.loads((op / "roofline.json").read_text()), op.name


SECRET = b"a test secret, not the deployment's"


def secret_file(folder: Path, secret: bytes = SECRET) -> Path:
    path = folder / "hidden.secret"
    path.write_bytes(secret + b"\n")
    path.chmod(0o600)
    return path


def test_no_hidden_shape_of_the_starter_is_in_the_repository() -> None:
    tracked = subprocess.run(["git", "ls-files", "--", str(STARTER_RELEASE)], check=True,
                             capture_output=True, text=True, cwd=STARTER_RELEASE).stdout
    assert tracked and HIDDEN_SHAPES_FILE not in tracked
    release = load_release(STARTER_RELEASE)
    assert release.hidden_shape_count == 0
    for op in release.operators.values():
        # the roofline covers exactly the public shapes: no hidden id, W or Q beside them
        assert set(op.roofline or {}) == {s.id for s in op.public.shapes}, op.name


def test_the_hidden_tier_is_drawn_from_the_secret_two_or_three_new_calls_per_operator() -> None:
    with release_with_generated_tier(STARTER_RELEASE, SECRET) as generated:
        release = load_release(generated.root)
        tier = {op.name: [(s.id, dict(s.input_kwargs)) for s in op.hidden_shapes]
                for op in release.operators.values()}
    with release_with_generated_tier(STARTER_RELEASE, SECRET) as again:
        assert {op.name: [(s.id, dict(s.input_kwargs)) for s in op.hidden_shapes]
                for op in load_release(again.root).operators.values()} == tier
    with release_with_generated_tier(STARTER_RELEASE, b"another secret, another tier") as other:
        others = {op.name: [s.id for s in op.hidden_shapes]
                  for op in load_release(other.root).operators.values()}
    assert sum(len(ids) for ids in tier.values()) == generated.shapes == 31
    assert sum(a[0] != b for name in tier for a, b in zip(tier[name], others[name],
                                                          strict=True)) >= 25
    for op in release.operators.values():
        assert 2 <= len(op.hidden_shapes) <= 3, op.name
        public_calls = [dict(s.input_kwargs) for s in op.public.shapes]
        for hidden in op.hidden_shapes:
            # a new call, not a public one under another name, with its W and Q
            assert dict(hidden.input_kwargs) not in public_calls, (op.name, hidden.id)
            assert op.roofline is not None and hidden.id in op.roofline, (op.name, hidden.id)


def test_the_generated_tier_keeps_to_the_rules_ranges() -> None:
    with release_with_generated_tier(STARTER_RELEASE, SECRET) as generated:
        release = load_release(generated.root)
    for op in release.operators.values():
        for hidden in op.hidden_shapes:
            sizes = dict(hidden.input_kwargs)
            if op.name == "varlen_prefill_attention":
                assert all(64 <= n <= 8192 for n in sizes["seq_lens"]), hidden.id
            elif "-decode-" in hidden.id:
                size = sizes.get("num_tokens", sizes.get("m", sizes.get("batch")))
                assert 1 <= size <= 256, hidden.id
            else:
                size = sizes.get("num_tokens", sizes.get("m"))
                assert 512 <= size <= 8192 and size % 64 == 0, hidden.id


def _each_unit_at_datasheet_peak_s(shape: ShapeRoofline, hardware: HardwareSpec) -> float:
    """The time of a kernel that does the shape's work on every unit at once, each at its
    datasheet peak: nothing can be faster, so the SOL must not exceed it."""
    compute = [flops / hardware.peak_flops[DTYPE_TO_PEAK_PATH[dtype]]
               for dtype, flops in shape.w_flops.items()]
    memory = (shape.q_read_bytes + shape.q_write_bytes) / hardware.hbm_bytes_per_s
    return max([*compute, memory])


def test_the_starter_sol_is_a_lower_bound_on_every_shape_and_hardware_profile() -> None:
    with release_with_generated_tier(STARTER_RELEASE, SECRET) as generated:
        release = load_release(generated.root)
    profiles = project_hardware_profiles()
    checked = 0
    for op in release.operators.values():
        assert op.roofline is not None
        for shape_id, shape in op.roofline.items():
            for profile in profiles.values():
                bound = _each_unit_at_datasheet_peak_s(shape, profile)
                where = (op.name, shape_id, profile.name)
                # Equal, not just below: no shape of the starter runs two tensor-core paths, so
                # the bound is also attainable and the SOL is no looser than it must be.
                assert roofline_point(shape, profile).sol_s == pytest.approx(bound, rel=1e-12), \
                    where
                assert shape.sol_ms[profile.name] == pytest.approx(bound * 1e3, rel=1e-12), where
                checked += 1
    assert checked == 4 * (214 + 31)  # the public shapes and the hidden tier


@pytest.mark.django_db
def test_the_starter_release_imports_and_passes_check_release(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    call_command("import_release", str(STARTER_RELEASE), "--hidden-secret-file",
                 str(secret_file(tmp_path)))
    out = capsys.readouterr().out
    assert "imported atrex-starter v1 — 15 operators, 214 shapes (+31 hidden)" in out
    release = Release.objects.get(name="atrex-starter")
    assert Shape.every_tier.filter(operator__release=release, hidden=True).count() == 31
    assert release.hidden.trace_rules["rules"]
    assert sum(WeightSet.objects.get(release=release, active=True).weights.values()) == \
        pytest.approx(1.0)
    call_command("check_release", "atrex-starter")
    out = capsys.readouterr().out
    assert "15 operators, 214 shapes" in out and "30 dev-tier references run, 0 problems" in out


@pytest.mark.django_db
def test_the_same_secret_imports_nothing_new_and_another_secret_is_a_new_version(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    first = release_import(path=STARTER_RELEASE, hidden_secret=SECRET)
    again = release_import(path=STARTER_RELEASE, hidden_secret=SECRET)
    other = release_import(path=STARTER_RELEASE, hidden_secret=b"another secret, another tier")
    assert (first.created, again.created, other.created) == (True, False, True)
    assert again.release == first.release and other.release.version == 2
    # the content hash the home page shows is keyed: no oracle for guessed sizes
    assert first.release.content_sha256 != release_content_sha256(STARTER_RELEASE)


@pytest.mark.django_db
def test_without_the_secret_the_starter_imports_without_a_hidden_tier_and_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    call_command("import_release", str(STARTER_RELEASE))
    out = capsys.readouterr().out
    assert "214 shapes, hardware" in out and "hidden)" not in out
    assert "warning: no hidden tier: this release's hidden shapes are drawn from a secret" in out
    assert not Shape.every_tier.filter(hidden=True).exists()


@pytest.mark.django_db
def test_a_secret_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = secret_file(tmp_path)
    path.chmod(0o644)
    with pytest.raises(CommandError, match="readable by others"):
        call_command("import_release", str(STARTER_RELEASE), "--hidden-secret-file", str(path))
    assert not Release.objects.exists()


@pytest.mark.django_db
def test_the_shipped_h200_trace_gives_weights_that_sum_to_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    traces = STARTER_RELEASE.parent / "traces"
    call_command("import_release", str(STARTER_RELEASE))
    call_command("import_traces", str(traces / "llama3.1-8b-h200-prefill.json.gz"),
                 str(traces / "llama3.1-8b-h200-decode.json.gz"), "--release", "atrex-starter",
                 "--phase", "prefill", "--phase", "decode")
    created = WeightSet.objects.get(source="traces")
    assert not created.active
    assert sum(created.weights.values()) == pytest.approx(1.0)
    # The Llama stack has no MoE or fp8 layer: those operators get no weight from it.
    assert created.weights["fused_moe_bf16"] == 0.0
    assert created.weights["paged_decode_attention"] > created.weights["rms_norm"] > 0
    assert 0 < created.report["unattributed_share"] < 0.01
    assert "unattributed share of GPU time (card-hour weighted): 0.2%" in capsys.readouterr().out
    # The same numbers the H200 run printed (benchmarks/make_llama_trace.py).
    printed = json.loads((STARTER_RELEASE.parents[2] / "benchmarks" / "results" /
                          "h200-2026-11-30" / "llama3.1-8b-h200-weights.json").read_text())
    assert created.weights == pytest.approx({op: printed.get(op, 0.0) for op in created.weights})
