"""Library kernels: device kernels compiled from an installed package's files.

Open kernel libraries (FlagGems, Liger-Kernel, fla-core, ...) are what teams lean on most;
their Triton kernels are neither the team's own nor a PyTorch fallback. They are named for
what they are: the package and its version ("flag-gems 5.0.2"), verdict `library` where they
did the work (adoption.py). Which tiers may rank them is the portal's business
(leaderboard/tiers.py), not the evaluator's.

A deployment declares the libraries its GPU hosts carry, in the worker's environment:

- `ATREX_LIBRARIES`: distribution names, comma-separated (`flag-gems,liger-kernel,fla-core`);
  every result's environment records their installed versions (None where one is missing,
  so a host that lacks one says so instead of scoring a candidate that fails to import it).
- `ATREX_LIBRARY_PATH`: folders (os.pathsep-separated) the libraries are installed in apart
  from the Python install (`pip install --target DIR`). The sandbox exposes them read-only
  and the child puts them on sys.path (jail.dsl_package_paths); libraries installed into the
  host's Python need no path: the sandbox sees the Python install.

Attribution, in the child at each launch (dsl.LaunchRecorder.launched): a kernel whose
function lives in a file of an installed distribution is that distribution's. Code that a
library writes at run time (FlagGems generates its pointwise kernels into a cache folder and
imports them from there) is attributed to the library whose frame launched it: the first
frame in an installed distribution's file (the runtime's own, Triton's, torch's and this
harness's, passed over) between the launch and the candidate's own code. Where the
candidate's own frame comes first, the kernel is foreign: code the candidate generated is
not a library's.

Imports no Django.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import FrameType

LIBRARIES_ENV = "ATREX_LIBRARIES"
LIBRARY_PATH_ENV = "ATREX_LIBRARY_PATH"
HARNESS = Path(__file__).resolve().parent
# The runtime a launch passes through, not the author of a kernel: skipped on the stack.
RUNTIME_PACKAGES = frozenset({"torch", "triton", "cutlass", "nvidia_cutlass_dsl"})


def declared_names(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The distributions the deployment declares (ATREX_LIBRARIES), in its order."""
    raw = environ.get(LIBRARIES_ENV, "")
    return [name.strip() for name in raw.split(",") if name.strip()]


def library_paths(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """The declared folders that exist (ATREX_LIBRARY_PATH)."""
    raw = environ.get(LIBRARY_PATH_ENV, "")
    return [Path(p).resolve() for p in raw.split(os.pathsep) if p and Path(p).is_dir()]


def installed_version(name: str, extra_paths: Iterable[Path] = ()) -> str | None:
    """The version of distribution `name` importable here or from `extra_paths`."""
    search = [*sys.path, *(str(p) for p in extra_paths)]
    wanted = _canonical(name)
    for dist in importlib.metadata.distributions(path=search):
        if _canonical(dist.metadata["Name"] or "") == wanted:
            return str(dist.version)
    return None


def declared_libraries(environ: Mapping[str, str] = os.environ) -> dict[str, str | None]:
    """{distribution: installed version or None}: what a result's environment records."""
    extra = library_paths(environ)
    return {name: installed_version(name, extra) for name in declared_names(environ)}


def split_label(label: str) -> tuple[str, str]:
    """"flag-gems 5.0.2" -> ("flag-gems", "5.0.2")."""
    package, _, version = label.rpartition(" ")
    return (package, version) if package else (label, "")


class LibraryIndex:
    """Which installed distribution a file belongs to, by the sys.path entry it lies under
    (the longest) and its top-level name; read lazily, cached per file."""

    def __init__(self, roots: Sequence[str] | None = None) -> None:
        self._roots = roots
        self._packages: Mapping[str, list[str]] | None = None
        self._by_file: dict[str, str | None] = {}
        self._top_by_file: dict[str, str | None] = {}

    def of_file(self, path: str | None) -> str | None:
        """"package version" of the distribution `path` was installed with, else None."""
        if not path:
            return None
        if path not in self._by_file:
            self._by_file[path] = self._resolve(path)
        return self._by_file[path]

    def launcher(self, frame: FrameType | None, own_files: frozenset[str]) -> str | None:
        """The library whose code launched a kernel: the first library frame between the
        launching `frame` and the candidate's own code. None when there is none, or when
        the candidate's code is not on the stack at all (the launch was not its call)."""
        found: str | None = None
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename in own_files:
                return found
            if found is None:
                top = self._top_level(filename)
                if top is not None and top not in RUNTIME_PACKAGES:
                    found = self.of_file(filename)
            frame = frame.f_back
        return None

    def _resolve(self, path: str) -> str | None:
        top = self._top_level(path)
        if top is None:
            return None
        names = self._distributions().get(top) or []
        for name in names:
            try:
                dist = importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                continue
            return f"{dist.metadata['Name'] or name} {dist.version}"
        return None

    def _top_level(self, path: str) -> str | None:
        """The top-level module a file belongs to (None: not under sys.path, or the
        harness's own)."""
        if path in self._top_by_file:
            return self._top_by_file[path]
        top: str | None = None
        try:
            resolved = Path(path).resolve()
        except (OSError, RuntimeError):
            resolved = None
        if resolved is not None and HARNESS not in resolved.parents:
            best: Path | None = None
            for root in self._root_paths():
                if root in resolved.parents and (best is None or len(root.parts) > len(best.parts)):
                    best = root
            if best is not None:
                first = resolved.relative_to(best).parts[0]
                top = first[:-3] if first.endswith(".py") else first
        self._top_by_file[path] = top
        return top

    def _root_paths(self) -> list[Path]:
        roots = self._roots if self._roots is not None else sys.path
        return [Path(r).resolve() for r in roots if r and Path(r).is_dir()]

    def _distributions(self) -> Mapping[str, list[str]]:
        if self._packages is None:
            self._packages = importlib.metadata.packages_distributions()
        return self._packages


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")
