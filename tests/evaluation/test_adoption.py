"""Fallback detection verdicts from recorded evidence (pure functions)."""

from __future__ import annotations

import pytest

from evaluation.harness.adoption import (
    COMPILED,
    OWN,
    TORCH,
    VENDOR,
    AdoptionEvidence,
    KernelRecord,
    adoption_report,
    aten_compute_ops,
    classify_kernel,
)


def evidence(kernels: list[tuple[str, float]] = (), own: set[str] = frozenset(),  # type: ignore[assignment]
             aten: dict[str, int] | None = None, launches: int = 0, compiled: int = 0,
             device: bool = True) -> AdoptionEvidence:
    return AdoptionEvidence(
        dsl_kernel_names=frozenset(own), foreign_dsl_launches=(),
        kernels=tuple(KernelRecord(n, t) for n, t in kernels), aten_ops=aten or {},
        dsl_launch_count=launches, compiled_frames=compiled, device_timed=device)


@pytest.mark.parametrize(("name", "category"), [
    ("_rms_norm_kernel", OWN),
    ("nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_NNT", VENDOR),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float>", VENDOR),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_", VENDOR),
    ("flash_fwd_kernel", VENDOR),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", VENDOR),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", COMPILED),
    ("triton_poi_fused_mul_silu_0", COMPILED),
    ("void at::native::reduce_kernel<512, 1>", TORCH),
    ("Memset (Device)", TORCH),
])
def test_it_classifies_kernels_by_name(name: str, category: str) -> None:
    assert classify_kernel(name, {"_rms_norm_kernel"}) == category


def test_a_kernel_only_of_its_own_dsl_is_native() -> None:
    report = adoption_report(evidence([("_k", 5e-6)], own={"_k"}), threshold=0.95)
    assert report.verdict == "native" and report.dsl_ratio == 1.0
    assert report.method == "device-time"


def test_a_small_memset_beside_a_dsl_kernel_stays_native() -> None:
    report = adoption_report(evidence([("_k", 99e-6), ("Memset (Device)", 1e-6)], own={"_k"}),
                             threshold=0.95)
    assert report.verdict == "native" and report.dsl_ratio == pytest.approx(0.99)


def test_a_dsl_kernel_beside_a_cublas_gemm_is_mixed() -> None:
    report = adoption_report(evidence([("_k", 1e-6), ("nvjet_sm90_x", 9e-6)], own={"_k"}),
                             threshold=0.95)
    assert report.verdict == "mixed" and report.dsl_ratio == pytest.approx(0.1)
    assert report.foreign_kernels[0]["name"] == "nvjet_sm90_x"
    assert report.foreign_kernels[0]["device_time_us"] == pytest.approx(9.0)


@pytest.mark.parametrize(("kernels", "verdict"), [
    ([("at::native::x", 1e-6), ("at::native::y", 2e-6)], "fallback-torch"),
    ([("cudnn_generated_sdpa", 9e-6), ("Memset (Device)", 1e-6)], "fallback-vendor"),
    ([("triton_red_fused_x", 3e-6)], "fallback-compiled"),
])
def test_without_own_kernels_the_dominant_foreign_kind_names_the_fallback(
        kernels: list[tuple[str, float]], verdict: str) -> None:
    report = adoption_report(evidence(kernels), threshold=0.95)
    assert report.verdict == verdict and report.dsl_ratio == 0.0


def test_the_threshold_is_the_releases() -> None:
    mixed = evidence([("_k", 9e-6), ("at::native::x", 1e-6)], own={"_k"})
    assert adoption_report(mixed, threshold=0.95).verdict == "mixed"
    assert adoption_report(mixed, threshold=0.85).verdict == "native"


def test_on_the_cpu_launches_and_compute_ops_are_counted() -> None:
    native = evidence(own={"_k"}, launches=2, aten={"aten::empty_like": 1}, device=False)
    report = adoption_report(native, threshold=0.95)
    assert report.method == "launch-count" and report.verdict == "native"
    torch_only = evidence(aten={"aten::mul.Tensor": 3, "aten::mean.dim": 1}, device=False)
    report = adoption_report(torch_only, threshold=0.95)
    assert report.verdict == "fallback-torch" and report.dsl_ratio == 0.0
    assert report.aten_compute_ops == {"aten::mul.Tensor": 3, "aten::mean.dim": 1}


def test_on_the_cpu_torch_compile_frames_mean_compiled() -> None:
    report = adoption_report(evidence(compiled=1, device=False), threshold=0.95)
    assert report.verdict == "fallback-compiled"


def test_allocation_and_view_ops_are_not_compute() -> None:
    ops = {"aten::empty_like": 1, "aten::view": 2, "aten::zeros": 1, "aten::empty.memory_format": 1,
           "aten::copy_": 1, "aten::mm": 1}
    assert aten_compute_ops(ops) == {"aten::copy_": 1, "aten::mm": 1}


def test_nothing_observed_is_a_fallback_with_a_note() -> None:
    report = adoption_report(evidence(device=False), threshold=0.95)
    assert report.verdict == "fallback-torch" and report.dsl_ratio == 0.0
    assert report.notes


def test_every_kernel_of_the_forward_is_listed_with_its_device_time_own_ones_too() -> None:
    report = adoption_report(evidence([("_k", 3e-6), ("Memset (Device)", 1e-6), ("_k", 5e-6),
                                       ("_k2", 1e-6)], own={"_k", "_k2"}), threshold=0.95)
    assert [(k["name"], k["category"], k["count"]) for k in report.kernels] == [
        ("_k", OWN, 2), ("Memset (Device)", TORCH, 1), ("_k2", OWN, 1)]  # longest first
    assert report.kernels[0]["device_time_us"] == pytest.approx(8.0)
    # the foreign ones are still the verdict's evidence, as before
    assert [k["name"] for k in report.foreign_kernels] == ["Memset (Device)"]


def test_the_interpreter_lists_no_kernels_it_has_no_device_times() -> None:
    report = adoption_report(evidence(own={"_k"}, launches=2, device=False), threshold=0.95)
    assert report.kernels == () and report.dsl_kernels == ("_k",)


def test_a_kernel_name_longer_than_the_channels_cap_is_cut_not_refused() -> None:
    """PyTorch's top-k is a CUB template whose demangled name runs past 2,000 characters:
    refusing it failed every shape of the public topk_filter, its reference included (H200,
    2026-12-06). The name is cut; its start still says whose kernel it is."""
    from evaluation.harness.stages.shape import MAX_KERNEL_NAME_CHARS, _kernel_names

    cub = "void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<" + "Policy800, " * 400 + ">"
    names = _kernel_names([cub, "_rms_norm_kernel"], "performance")
    assert len(cub) > MAX_KERNEL_NAME_CHARS
    assert {len(n) for n in names} == {MAX_KERNEL_NAME_CHARS, len("_rms_norm_kernel")}
    assert classify_kernel(cub[:MAX_KERNEL_NAME_CHARS], frozenset()) == TORCH


@pytest.mark.parametrize("names", [None, "a", [1], ["a"] * 2001])
def test_a_list_of_kernel_names_that_is_not_one_is_still_refused(names: object) -> None:
    from evaluation.harness.stages.shape import CandidateError, _kernel_names

    with pytest.raises(CandidateError, match="malformed list of kernel names"):
        _kernel_names(names, "correctness")
