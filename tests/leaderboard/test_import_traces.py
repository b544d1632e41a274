"""import_traces: profiler GPU time attributed to operators, card-hour weighted, inactive."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluation.catalog.models import Release, ReleaseHidden
from evaluation.traces import (
    TraceError,
    parse_rules,
    read_trace,
    rules_from_metadata,
    trace_shares,
)
from leaderboard.models import WeightSet
from leaderboard.services import weight_set_from_release
from tests.world import import_fixture_release

pytestmark = pytest.mark.django_db

RULES = {"rules": [
    {"operator": "rms_norm", "annotation": "^atrex::rms_norm$"},
    {"operator": "gemm_fp16", "annotation": "^atrex::gemm_fp16$"},
    {"operator": "silu_and_mul", "kernel": "act_and_mul_kernel"},
]}


def kernel(name: str, dur: float, correlation: int, ts: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 5,
            "dur": dur, "args": {"correlation": correlation}}


def launch(correlation: int, ts: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": ts, "dur": 1, "args": {"correlation": correlation}}


def annotation(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "dur": dur}


def trace(path: Path, *, norm: float, gemm: float, act: float, other: float) -> Path:
    """A step: an annotated norm (two kernels), an annotated GEMM nested in a layer range,
    an unannotated activation kernel and an unclaimed copy kernel; times in µs."""
    events = [
        annotation("layer.0", 0, 100),
        annotation("atrex::rms_norm", 10, 10), launch(1, 11), launch(2, 12),
        annotation("atrex::gemm_fp16", 30, 10), launch(3, 31),
        launch(4, 50), launch(5, 60),
        kernel("elementwise_kernel<float>", norm / 2, 1, 11),
        kernel("reduce_kernel<float>", norm / 2, 2, 12),
        kernel("nvjet_hsh_128x256", gemm, 3, 31),
        kernel("vllm::act_and_mul_kernel<bf16>", act, 4, 50),
        kernel("copy_kernel", other, 5, 60),
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 30, "dur": 5},
    ]
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    return path


@pytest.fixture
def release() -> Release:
    release = import_fixture_release()
    weight_set_from_release(release)  # v1, active, as import_release makes it
    ReleaseHidden.objects.filter(release=release).update(trace_rules=RULES)
    return release


def test_shares_follow_annotations_then_kernel_names(tmp_path: Path) -> None:
    rules = parse_rules(RULES, ["rms_norm", "gemm_fp16", "silu_and_mul"], "rules")
    events = read_trace(trace(tmp_path / "t.json.gz", norm=20, gemm=50, act=10, other=20))
    shares = trace_shares(events, rules, name="t", phase="prefill")
    assert shares.gpu_time_us == 100
    assert shares.by_operator == {"gemm_fp16": 0.5, "rms_norm": 0.2, "silu_and_mul": 0.1}
    assert shares.unattributed == pytest.approx(0.2)
    assert shares.top_unattributed == [("copy_kernel", pytest.approx(0.2))]


def test_the_command_makes_an_inactive_weight_set_weighted_by_card_hours(
        release: Release, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefill = trace(tmp_path / "prefill.json.gz", norm=20, gemm=50, act=10, other=20)
    decode = trace(tmp_path / "decode.json", norm=40, gemm=40, act=0, other=20)
    decode.write_bytes(gzip.decompress(decode.read_bytes()))  # plain JSON works too
    active_before = WeightSet.objects.get(release=release, active=True)
    call_command("import_traces", str(prefill), str(decode), "--release", "atrex-fixture",
                 "--phase", "prefill", "--phase", "decode",
                 "--card-hours", "3", "--card-hours", "1")
    created = WeightSet.objects.get(release=release, source="traces")
    assert not created.active
    assert WeightSet.objects.get(release=release, active=True) == active_before
    # Card-hour weighted shares: gemm (3*.5+1*.4)/4 = .475, norm (3*.2+1*.4)/4 = .25,
    # silu .075; attributed .8 -> weights .59375, .3125, .09375.
    assert created.weights["gemm_fp16"] == pytest.approx(0.59375)
    assert created.weights["rms_norm"] == pytest.approx(0.3125)
    assert created.weights["silu_and_mul"] == pytest.approx(0.09375)
    assert created.weights["causal_attention"] == 0.0
    assert sum(created.weights.values()) == pytest.approx(1.0)
    assert created.report["unattributed_share"] == pytest.approx(0.2)
    assert created.report["share_by_phase"]["decode"]["rms_norm"] == pytest.approx(0.4)
    out = capsys.readouterr().out
    assert f"weight set v{created.version} created (inactive)" in out
    assert "unattributed share of GPU time (card-hour weighted): 20.0%" in out


def test_bad_input_is_refused_and_nothing_is_created(release: Release, tmp_path: Path) -> None:
    good = trace(tmp_path / "ok.json.gz", norm=20, gemm=50, act=10, other=20)
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [')
    count = WeightSet.objects.count()
    with pytest.raises(CommandError, match="broken.json: not a Chrome-trace JSON file"):
        call_command("import_traces", str(good), str(broken), "--release", "atrex-fixture",
                     "--phase", "decode")
    with pytest.raises(CommandError, match="--card-hours: give it once, or once per file"):
        call_command("import_traces", str(good), str(good), "--release", "atrex-fixture",
                     "--phase", "decode", "--card-hours", "1", "--card-hours", "2",
                     "--card-hours", "3")
    empty = tmp_path / "cpu-only.json"
    empty.write_text(json.dumps({"traceEvents": [annotation("x", 0, 1)]}))
    with pytest.raises(CommandError, match="no GPU kernel time"):
        call_command("import_traces", str(empty), "--release", "atrex-fixture",
                     "--phase", "decode")
    assert WeightSet.objects.count() == count
    with pytest.raises(TraceError, match=r"rules\[0\]\.operator: not an operator"):
        parse_rules({"rules": [{"operator": "nope", "kernel": "x"}]}, ["rms_norm"], "rules")


def test_releases_without_rules_use_their_metadata_kernel_names() -> None:
    rules = rules_from_metadata({"rms_norm": {"shapes": {"a": {
        "origin_kernel": "vllm::rms_norm_kernel (csrc/layernorm_kernels.cu)"}}}, "x": None})
    assert [(r.operator, r.pattern.pattern, r.on) for r in rules] == [
        ("rms_norm", "rms_norm_kernel", "kernel")]
