"""Per-DSL attribution: whose kernel a launch was, in which DSL, and what that does to the
verdict (CPU: recorders and adapters with stand-ins for the GPU-only runtimes; the real
Gluon and CuTe DSL runs are in docs/integrity-gpu.md)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluation.harness.adoption import (
    FALLBACK_OTHER_DSL,
    MIXED,
    NATIVE,
    OTHER_DSL,
    VENDOR,
    AdoptionEvidence,
    KernelRecord,
    adoption_report,
    classify_kernel,
)
from evaluation.harness.dsl import (
    CuteAdapter,
    LaunchRecorder,
    Observers,
    TritonAdapter,
    adapter_for,
    launch_names,
    triton_dialect,
    unavailable_reason,
)
from evaluation.harness.isolation import jail

OWN_FILE = "/atrex/work/candidate.py"


def recorder(dsl: str) -> LaunchRecorder:
    return LaunchRecorder(own_files=frozenset({OWN_FILE}), dsl=dsl)


def test_a_kernel_of_the_declared_dsl_from_the_candidates_file_is_its_own() -> None:
    r = recorder("gluon")
    r.launched("_rms_gluon", OWN_FILE, "gluon")
    assert (r.own_kernels, r.own_launches, r.other_dsl_kernels) == ({"_rms_gluon"}, 1, {})


def test_a_kernel_of_another_dsl_from_the_candidates_file_is_named_not_credited() -> None:
    r = recorder("gluon")
    r.launched("_rms_plain_triton", OWN_FILE, "triton")
    assert r.own_kernels == set() and r.own_launches == 0
    assert r.other_dsl_kernels == {"_rms_plain_triton": "triton"}
    assert launch_names(r) == {"_rms_plain_triton"}


def test_a_kernel_from_another_file_is_foreign_whatever_its_dsl() -> None:
    r = recorder("triton")
    r.launched("triton_poi_fused_mul_0", "/tmp/torchinductor/xy.py", "triton")
    assert r.own_kernels == set() and r.other_dsl_kernels == {}
    assert r.foreign_launches == ["triton_poi_fused_mul_0"]


def test_a_gluon_kernel_is_told_from_a_plain_triton_one() -> None:
    gluon = pytest.importorskip("triton.experimental.gluon")
    import triton
    import triton.language as tl

    @gluon.jit
    def gluon_kernel(ptr):  # type: ignore[no-untyped-def]
        pass

    @triton.jit
    def plain_kernel(ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        pass

    assert triton_dialect(gluon_kernel) == "gluon"
    assert triton_dialect(plain_kernel) == "triton"


def evidence(kernels: list[tuple[str, float]], dsl: str, own: set[str] = frozenset(),  # type: ignore[assignment]
             other: dict[str, str] | None = None) -> AdoptionEvidence:
    return AdoptionEvidence(
        dsl_kernel_names=frozenset(own), foreign_dsl_launches=(),
        kernels=tuple(KernelRecord(n, t) for n, t in kernels), aten_ops={},
        dsl_launch_count=len(own), compiled_frames=0, device_timed=True, dsl=dsl,
        other_dsl_kernels=other or {})


def test_a_gluon_file_whose_work_is_a_plain_triton_kernel_is_not_native_gluon() -> None:
    report = adoption_report(evidence([("_rms_plain_triton", 9e-6)], "gluon",
                                      other={"_rms_plain_triton": "triton"}), threshold=0.95)
    assert report.verdict == FALLBACK_OTHER_DSL and report.dsl_ratio == 0.0
    assert report.foreign_kernels[0]["dsl"] == "triton"
    assert "other DSL: triton (declared: gluon)" in report.notes


def test_a_triton_file_declared_as_cute_dsl_is_not_credited_as_cute() -> None:
    report = adoption_report(evidence([("_silu_and_mul_kernel", 4e-6)], "cute",
                                      other={"_silu_and_mul_kernel": "triton"}), threshold=0.95)
    assert report.verdict == FALLBACK_OTHER_DSL


def test_cute_dsl_kernels_in_a_triton_file_are_known_by_their_names() -> None:
    name = "kernel_cutlass_silu_kernel_tensorptrf16gmemo1024_0"
    assert classify_kernel(name, set(), {}, "triton") == OTHER_DSL
    # declared CuTe DSL: only the kernels the candidate's own source compiled are its own
    assert classify_kernel(name, {name}, {}, "cute") != OTHER_DSL
    assert classify_kernel(name, set(), {}, "cute") == VENDOR
    report = adoption_report(evidence([(name, 3e-6), ("_own", 1e-6)], "triton", own={"_own"}),
                             threshold=0.95)
    assert report.verdict == MIXED and "other DSL: cute (declared: triton)" in report.notes


def test_a_cute_kernel_beside_a_torch_matmul_is_mixed_and_alone_native() -> None:
    own = "kernel_cutlass_rms_kernel_tensorptrbf16gmem_0"
    alone = adoption_report(evidence([(own, 5e-6)], "cute", own={own}), threshold=0.95)
    assert (alone.verdict, alone.dsl_ratio) == (NATIVE, 1.0)
    beside = adoption_report(evidence([(own, 1e-6), ("nvjet_sm90_tst_128x256", 20e-6)],
                                      "cute", own={own}), threshold=0.95)
    assert beside.verdict == MIXED


@pytest.mark.parametrize(("dsl", "device", "expected"), [
    ("triton", "cpu", None),
    ("gluon", "cpu", "this host cannot evaluate Gluon: its kernels need a GPU"),
    ("cute", "cpu", "this host cannot evaluate CuTe DSL: its kernels need an NVIDIA GPU"),
    ("flydsl", "cuda", "this host cannot evaluate FlyDSL yet: the evaluator has no adapter"),
    ("fortran", "cuda", "unknown DSL 'fortran'"),
])
def test_a_host_says_which_dsls_it_cannot_evaluate(dsl: str, device: str,
                                                    expected: str | None) -> None:
    reason = unavailable_reason(dsl, device)
    assert reason == expected if expected is None else (reason or "").startswith(expected)


def test_cute_dsl_on_a_gpu_host_without_the_package_says_so(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert unavailable_reason("cute", "cuda") == (
        "this host cannot evaluate CuTe DSL: nvidia-cutlass-dsl is not installed here")
    assert unavailable_reason("gluon", "cuda") is None


def test_a_child_observes_triton_launches_whatever_it_was_declared() -> None:
    assert [type(a) for a in Observers("triton").adapters] == [TritonAdapter]
    assert [type(a) for a in Observers("gluon").adapters] == [TritonAdapter]
    assert [type(a) for a in Observers("cute").adapters] == [CuteAdapter, TritonAdapter]
    with pytest.raises(ValueError, match="unsupported DSL 'flydsl'"):  # known, no adapter
        adapter_for("flydsl")


# A stand-in for the parts of nvidia-cutlass-dsl 4.2.1 the adapter hooks (the real package
# needs a GPU): a DSL whose kernel generator returns (launch result, symbol), an executor
# told its symbols when it loads them, and a run.

class _BaseDSL:
    def __init__(self) -> None:
        self.kernel_symbols: list[str] = []

    def kernel_launcher(self, *args: Any, **kwargs: Any) -> Any:
        def decorator(body: Any) -> Any:
            def generate(*a: Any, **k: Any) -> tuple[str, str]:
                return "launch-op", f"kernel_cutlass_{body.__name__}_tensorf16_0"
            return generate
        return decorator


class _JitExecutor:
    runs = 0

    def update_jit_cuda_modules(self, kernel_symbols: list[str]) -> _JitExecutor:
        return self

    def run_compiled_program(self, exe_args: Any) -> None:
        type(self).runs += 1


@pytest.fixture
def fake_cutlass(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    modules = {name: types.ModuleType(name) for name in (
        "cutlass", "cutlass.cute", "cutlass.base_dsl", "cutlass.base_dsl.dsl",
        "cutlass.base_dsl.jit_executor", "cutlass.cutlass_dsl", "cutlass.cutlass_dsl.cutlass")}
    modules["cutlass.base_dsl.dsl"].BaseDSL = type("BaseDSL", (_BaseDSL,), {})  # type: ignore[attr-defined]
    modules["cutlass.base_dsl.jit_executor"].JitExecutor = type(  # type: ignore[attr-defined]
        "JitExecutor", (_JitExecutor,), {})
    modules["cutlass.cutlass_dsl.cutlass"].KernelLauncher = type("KernelLauncher", (), {})  # type: ignore[attr-defined]
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    yield


def _compile(body: Any, executor_symbols: int = 1) -> Any:
    """What cute.compile does, as far as the adapter sees it: trace the kernels, load them."""
    from cutlass.base_dsl.dsl import BaseDSL
    from cutlass.base_dsl.jit_executor import JitExecutor

    dsl = BaseDSL()
    symbols = [dsl.kernel_launcher()(body)()[1] for _ in range(executor_symbols)]
    return JitExecutor().update_jit_cuda_modules(symbols)


def test_cute_dsl_kernels_the_candidates_source_compiled_are_its_own(fake_cutlass: None) -> None:
    adapter = CuteAdapter()
    adapter.prepare()
    own_kernel = types.FunctionType(compile("def rms_kernel(): pass", OWN_FILE, "exec")
                                    .co_consts[0], {})
    library_kernel = types.FunctionType(compile("def gemm_kernel(): pass",
                                                "/site-packages/cutlass/examples/gemm.py",
                                                "exec").co_consts[0], {})
    mine, theirs = _compile(own_kernel), _compile(library_kernel)  # compiled before recording
    r = recorder("cute")
    with adapter.recording(r):
        mine.run_compiled_program([])
        theirs.run_compiled_program([])
    assert r.own_kernels == {"kernel_cutlass_rms_kernel_tensorf16_0"} and r.own_launches == 1
    assert r.foreign_launches == ["kernel_cutlass_gemm_kernel_tensorf16_0"]
    mine.run_compiled_program([])  # outside recording: runs, reports nothing
    assert r.own_launches == 1 and type(mine).runs == 3


def test_a_cute_dsl_run_that_raises_is_not_counted(fake_cutlass: None) -> None:
    from cutlass.base_dsl.jit_executor import JitExecutor

    adapter = CuteAdapter()
    adapter.prepare()
    own_kernel = types.FunctionType(compile("def k(): pass", OWN_FILE, "exec").co_consts[0], {})
    executor = _compile(own_kernel)

    def crash(self: Any, exe_args: Any) -> None:
        raise RuntimeError("launch failed")

    JitExecutor.run_compiled_program = crash  # type: ignore[attr-defined]
    r = recorder("cute")
    with adapter.recording(r), pytest.raises(RuntimeError):
        executor.run_compiled_program([])
    assert r.own_launches == 0 and r.depth == 0


def test_a_dsl_installed_outside_site_packages_is_exposed_to_the_child(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "nvidia_cutlass_dsl" / "python_packages" / "cutlass"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (tmp_path / "nvidia_cutlass_dsl" / "lib").mkdir()
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.delitem(sys.modules, "cutlass", raising=False)
    assert jail.dsl_package_paths() == [(tmp_path / "nvidia_cutlass_dsl", package.parent)]
    assert tmp_path / "nvidia_cutlass_dsl" in jail.python_install()


def test_device_kernels_the_candidates_source_compiled_ahead_are_its_own(fake_cutlass: None
                                                                         ) -> None:
    from evaluation.harness.dsl import credit_compiled

    adapter = CuteAdapter()
    adapter.prepare()
    own_kernel = types.FunctionType(compile("def rms_kernel(): pass", OWN_FILE, "exec")
                                    .co_consts[0], {})
    _compile(own_kernel)
    compiled = adapter.compiled_kernels()
    assert compiled == {"kernel_cutlass_rms_kernel_tensorf16_0": OWN_FILE}
    r = recorder("cute")
    credit_compiled(r, {**compiled, "kernel_cutlass_lib_kernel_0": "/site-packages/lib.py"},
                    {"kernel_cutlass_rms_kernel_tensorf16_0", "kernel_cutlass_lib_kernel_0",
                     "void at::native::reduce_kernel<512, 1>"})
    # credited by name, not counted as a launch (the executor's run counts those)
    assert r.own_kernels == {"kernel_cutlass_rms_kernel_tensorf16_0"} and r.own_launches == 0
