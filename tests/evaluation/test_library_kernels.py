"""Library kernels: a kernel compiled from an installed package's files is that package's,
named with its version, verdict `library`; the DSL ratio counts the candidate's own kernels
only. A small fixture package with a Triton kernel is installed into a folder of the test's
own, declared as a GPU host declares its libraries (ATREX_LIBRARY_PATH, ATREX_LIBRARIES),
and called by candidates evaluated in the sandbox with Triton's interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

import jsonschema
import pytest

from evaluation.harness.adoption import (
    LIBRARY,
    LIBRARY_VERDICT,
    MIXED,
    AdoptionEvidence,
    KernelRecord,
    adoption_report,
)
from evaluation.harness.dsl import LaunchRecorder, launch_names
from evaluation.harness.isolation import jail
from evaluation.harness.libraries import LibraryIndex, declared_libraries
from evaluation.harness.results import SCHEMA_PATH
from tests.evaluation.helpers import run_candidate

PACKAGE, VERSION = "atrex-fixture-kernels", "1.2.3"
LABEL = f"{PACKAGE} {VERSION}"
FIXTURE = Path(__file__).parent / "data" / "library_fixture" / "kernels.py"
OWN_FILE = "/atrex/work/candidate.py"
SHAPE = ["dev-t3-h200"]


def install_fixture_package(site: Path) -> Path:
    """The fixture package and its dist-info in `site`, as `pip install --target` leaves
    a wheel."""
    package = site / "atrex_fixture_kernels"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FIXTURE.read_text())
    (package / "hooks.py").write_text((FIXTURE.parent / "hooks.py").read_text())
    info = site / f"atrex_fixture_kernels-{VERSION}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {VERSION}\n")
    (info / "top_level.txt").write_text("atrex_fixture_kernels\n")
    (info / "RECORD").write_text("atrex_fixture_kernels/__init__.py,,\n"
                                 "atrex_fixture_kernels/hooks.py,,\n")
    return site


@pytest.fixture
def library_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = install_fixture_package(tmp_path / "site")
    monkeypatch.setenv("ATREX_LIBRARY_PATH", str(site))
    monkeypatch.setenv("ATREX_LIBRARIES", f"{PACKAGE},not-installed-here")
    return site


CALLS_THE_LIBRARY = '''
import torch
import atrex_fixture_kernels


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return atrex_fixture_kernels.{function}(x, weight, self.eps)
'''

# One launch of its own kernel (joining the two halves), two of the library's (one per half):
# a third of the launches are the candidate's own, and no torch compute.
MIXED_FILE = '''
import torch
import triton
import triton.language as tl
import atrex_fixture_kernels


@triton.jit
def own_join_kernel(top_ptr, bottom_ptr, out_ptr, n_top, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    in_top = offsets < n_top
    in_bottom = (offsets >= n_top) & (offsets < n)
    top = tl.load(top_ptr + offsets, mask=in_top, other=0.0)
    bottom = tl.load(bottom_ptr + (offsets - n_top), mask=in_bottom, other=0.0)
    tl.store(out_ptr + offsets, tl.where(in_top, top, bottom), mask=offsets < n)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        half = x.shape[0] // 2
        top = atrex_fixture_kernels.rms_norm(x[:half], weight, self.eps)
        bottom = atrex_fixture_kernels.rms_norm(x[half:], weight, self.eps)
        out = torch.empty_like(x)
        n = out.numel()
        own_join_kernel[(triton.cdiv(n, 256),)](top, bottom, out, top.numel(), n, BLOCK=256)
        return out
'''


def test_a_candidate_calling_an_installed_librarys_kernel_gets_the_library_verdict(
        library_site: Path) -> None:
    result = run_candidate("rms_norm", CALLS_THE_LIBRARY.format(function="rms_norm"), SHAPE)
    shape = result.shapes[0]
    assert shape.status == "passed", shape.error
    assert shape.adoption is not None
    assert shape.adoption["verdict"] == LIBRARY_VERDICT
    assert shape.adoption["dsl_ratio"] == 0.0  # not the team's own kernel
    assert list(shape.adoption["libraries"]) == [
        {"package": PACKAGE, "version": VERSION, "kernels": ["fixture_rms_norm_kernel"]}]
    assert {"name": "fixture_rms_norm_kernel", "category": LIBRARY, "library": LABEL,
            "count": 1} in shape.adoption["foreign_kernels"]
    # the host's declared libraries, with the versions installed there
    assert shape.environment is not None
    assert shape.environment["libraries"] == {PACKAGE: VERSION, "not-installed-here": None}
    jsonschema.validate(result.to_dict(), __import__("json").loads(SCHEMA_PATH.read_text()))


def test_a_kernel_a_library_generates_at_run_time_is_still_the_librarys(
        library_site: Path) -> None:
    result = run_candidate("rms_norm", CALLS_THE_LIBRARY.format(function="rms_norm_generated"),
                           SHAPE)
    shape = result.shapes[0]
    assert shape.status == "passed", shape.error
    assert shape.adoption is not None and shape.adoption["verdict"] == LIBRARY_VERDICT
    assert shape.adoption["libraries"][0]["kernels"] == ["fixture_generated_rms_norm_kernel"]


def test_a_file_with_its_own_kernel_and_a_librarys_is_mixed_by_its_own_share(
        library_site: Path) -> None:
    result = run_candidate("rms_norm", MIXED_FILE, SHAPE)
    shape = result.shapes[0]
    assert shape.status == "passed", shape.error
    assert shape.adoption is not None
    assert shape.adoption["verdict"] == MIXED
    assert shape.adoption["dsl_ratio"] == pytest.approx(1 / 3)
    assert list(shape.adoption["dsl_kernels"]) == ["own_join_kernel"]
    assert shape.adoption["time_by_category"] == {"dsl": 1.0, LIBRARY: 2.0}


def test_without_the_declared_folder_the_sandbox_cannot_import_the_library(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fixture_package(tmp_path / "site")  # installed, but not declared
    monkeypatch.delenv("ATREX_LIBRARY_PATH", raising=False)
    result = run_candidate("rms_norm", CALLS_THE_LIBRARY.format(function="rms_norm"), SHAPE)
    assert result.shapes[0].status != "passed"
    assert "atrex_fixture_kernels" in (result.shapes[0].error or "")


def test_the_declared_folder_is_exposed_to_the_sandbox_and_put_on_its_path(
        library_site: Path) -> None:
    assert (library_site, library_site) in jail.dsl_package_paths()
    assert library_site in jail.python_install()


def test_declared_libraries_name_the_installed_version_or_none(library_site: Path) -> None:
    assert declared_libraries() == {PACKAGE: VERSION, "not-installed-here": None}


def test_the_recorder_names_a_kernel_from_a_package_file_by_package_and_version(
        library_site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(library_site))
    recorder = LaunchRecorder(own_files=frozenset({OWN_FILE}),
                              libraries=LibraryIndex(roots=[str(library_site), *sys.path]))
    package_file = str(library_site / "atrex_fixture_kernels" / "__init__.py")
    recorder.launched("fixture_rms_norm_kernel", package_file)
    recorder.launched("triton_poi_fused_mul_0", "/tmp/torchinductor/xy.py")
    assert recorder.library_kernels == {"fixture_rms_norm_kernel": LABEL}
    assert recorder.library_launches == 1
    assert recorder.foreign_launches == ["triton_poi_fused_mul_0"]
    assert launch_names(recorder) == {"fixture_rms_norm_kernel", "triton_poi_fused_mul_0"}


def test_library_device_time_is_not_the_teams_and_not_torch() -> None:
    evidence = AdoptionEvidence(
        dsl_kernel_names=frozenset({"own_kernel"}), foreign_dsl_launches=(),
        kernels=(KernelRecord("own_kernel", 1e-6), KernelRecord("rms_norm_kernel", 3e-6),
                 KernelRecord("at::native::vectorized_elementwise_kernel", 1e-6)),
        aten_ops={}, dsl_launch_count=1, compiled_frames=0, device_timed=True,
        library_kernels={"rms_norm_kernel": "flag-gems 5.0.2"}, library_launch_count=1)
    report = adoption_report(evidence, threshold=0.95)
    assert report.verdict == MIXED and report.dsl_ratio == pytest.approx(0.2)
    assert report.time_by_category[LIBRARY] == pytest.approx(3e-6)
    assert report.libraries == ({"package": "flag-gems", "version": "5.0.2",
                                 "kernels": ["rms_norm_kernel"],
                                 "device_time_us": pytest.approx(3.0)},)
    alone = adoption_report(AdoptionEvidence(
        dsl_kernel_names=frozenset(), foreign_dsl_launches=(),
        kernels=(KernelRecord("_rms_norm_forward_kernel", 3e-6),),
        aten_ops={}, dsl_launch_count=0, compiled_frames=0, device_timed=True,
        library_kernels={"_rms_norm_forward_kernel": "liger-kernel 0.8.5"}), threshold=0.95)
    assert alone.verdict == LIBRARY_VERDICT and alone.dsl_ratio == 0.0


def test_a_librarys_cached_kernel_launched_without_run_is_still_the_librarys(
        library_site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FlagGems' LibEntry launches its compiled kernels directly after their first call
    (no JITFunction.run): Triton's launch-enter hook sees them, and the frames that launched
    them name the library (on the H200 its kernels were called fallback-torch without it)."""
    triton = pytest.importorskip("triton")
    from evaluation.harness.dsl import _launch_enter_hook

    monkeypatch.syspath_prepend(str(library_site))
    recorder = LaunchRecorder(own_files=frozenset({OWN_FILE}),
                              libraries=LibraryIndex(roots=[str(library_site), *sys.path]))
    scope: dict[str, object] = {}
    from triton.compiler.compiler import LazyDict

    # the library's cached launch, as CompiledKernel.run calls the hook (with a LazyDict,
    # whose `get()` takes no key), from its own file
    exec(compile("def launch(name):\n    hook = triton.knobs.runtime.launch_enter_hook\n"
                 "    hook(LazyDict({'name': name, 'function': 0, 'stream': 0}))\n",
                 str(library_site / "atrex_fixture_kernels" / "cache.py"), "exec"),
         {"triton": triton, "LazyDict": LazyDict}, scope)
    # the candidate's forward calling the library
    exec(compile("def forward(launch):\n    launch('fixture_cached_kernel')\n", OWN_FILE,
                 "exec"), {}, scope)
    with _launch_enter_hook(recorder):
        scope["forward"](scope["launch"])  # type: ignore[operator]
    assert recorder.library_kernels == {"fixture_cached_kernel": LABEL}
    assert recorder.foreign_launches == []


IMPORTS_A_HOOKING_LIBRARY = '''
import torch
import atrex_fixture_kernels
import atrex_fixture_kernels.hooks
{after_import}


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return atrex_fixture_kernels.rms_norm(x, weight, self.eps)
'''


def test_hooks_a_library_adds_while_imported_are_not_the_candidates(library_site: Path) -> None:
    """An installed, read-only library that adds an audit hook and an import finder while it
    is imported does not fail the candidate's integrity check (on the H200 every Liger-Kernel
    shape did); the same library function adding a hook when the candidate calls it does."""
    result = run_candidate("rms_norm", IMPORTS_A_HOOKING_LIBRARY.format(after_import=""), SHAPE)
    shape = result.shapes[0]
    assert shape.status == "passed", shape.error
    assert shape.adoption is not None and shape.adoption["verdict"] == LIBRARY_VERDICT

    called = run_candidate("rms_norm", IMPORTS_A_HOOKING_LIBRARY.format(
        after_import="atrex_fixture_kernels.hooks.add_hook_later()"), SHAPE).shapes[0]
    assert called.status == "failed"
    assert "integrity check failed" in (called.error or "")
    assert "an audit hook" in (called.error or "")
    assert "an import hook" not in (called.error or "")  # the import's finder stays allowed


def test_a_hook_counts_as_the_candidates_where_the_library_file_is_writable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The candidate cannot pass its own code off as a library's: a file the child can
    write (its scratch space, a folder it put on sys.path) is never a library's, nor is a
    read-only file outside the library folders fixed before the candidate ran (a module of
    its own named like an installed distribution, in a folder it put on sys.path)."""
    from evaluation.harness.isolation import integrity

    site = install_fixture_package(tmp_path / "site")
    module_file = str(site / "atrex_fixture_kernels" / "hooks.py")
    code = compile("import sys\nframe = sys._getframe(0)\n", module_file, "exec")
    scope: dict[str, object] = {}
    exec(code, scope)
    frame = scope["frame"]
    monkeypatch.setattr(integrity, "writable", lambda path: False)
    monkeypatch.setattr(integrity, "_TRUSTED_ROOTS", [])
    monkeypatch.setattr(integrity, "_LIBRARY_INDEX", [])
    integrity.trust_library_roots()  # before the folder is on sys.path: never a library's
    monkeypatch.syspath_prepend(str(site))
    assert integrity.library_import_hook(frame) is None  # type: ignore[arg-type]
    integrity.trust_library_roots()  # on the import path the harness gave: a library's
    assert integrity.library_import_hook(frame) == LABEL  # type: ignore[arg-type]
    monkeypatch.setattr(integrity, "writable", lambda path: True)
    assert integrity.library_import_hook(frame) is None  # type: ignore[arg-type]
