"""The sandboxed child's private root: it sees its work folder, the Python install, and
nothing else of the host.

Masking known hidden folders one by one was not enough: the checkout tracks hidden data in
more places than any list names, `.git` holds every version of it, and path-bound Unix
sockets (PostgreSQL's, MariaDB's) sit in /run and /tmp where no network namespace reaches.
So the child gets a root of its own, built from an allowlist inside its mount namespace:

    /usr, /bin, /lib*, /sbin         the system (read-only; the compiler Triton needs)
    <the Python install>             prefixes and site-packages (read-only)
    /etc/ld.so.cache and a few more  for the dynamic loader and ldconfig (read-only)
    /atrex/code/evaluation/harness   the harness, the only project code (read-only)
    /atrex/work                      this child's work folder (its own sub-folders writable)
    /atrex/cache                     Triton's and Inductor's caches for this candidate
    /dev/null, zero, full, random, urandom, /dev/nvidia*   devices
    /tmp, /dev/shm                   empty, private to this child, size-capped
    /proc                            of the child's own PID namespace; /sys on a GPU only

A path holding hidden data that happens to lie inside an allowed folder (a checkout under
/usr, say) is covered with an empty tmpfs. The plan is plain data, turned into a shell
script that the namespace's first process runs as root before it drops to the sandbox uid;
that process stays alive as the namespace's init, so that when the worker dies the whole
namespace dies with it (child_process.py).

Imports no Django.
"""

from __future__ import annotations

import importlib.util
import shlex
import site
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..libraries import library_paths

WORK = Path("/atrex/work")
CACHE = Path("/atrex/cache")
CODE = Path("/atrex/code")
HARNESS = Path(__file__).resolve().parents[1]
CHILD_MAIN_INSIDE = CODE / "evaluation" / "harness" / "isolation" / "child_main.py"

SYSTEM_DIRS = ("/usr",)
SYSTEM_TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # links on merged /usr
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives")
PLAIN_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

OpKind = Literal["bind_ro", "bind_rw", "device", "symlink", "tmpfs", "mask", "empty_file"]


@dataclass(frozen=True)
class Op:
    """One step of building the root; `target` is the path inside it."""

    kind: OpKind
    target: str
    source: str = ""
    mode: str = ""  # tmpfs mode, and its size= where capped


@dataclass(frozen=True)
class JailPaths:
    """Host folders given to one child."""

    mountpoint: Path  # an empty folder the private root is mounted on (inside the namespace)
    workdir: Path  # -> /atrex/work
    cache_dir: Path  # -> /atrex/cache


def python_install() -> list[Path]:
    """Folders the interpreter, its standard library and its packages live in."""
    paths = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             *site.getsitepackages()}
    for name in ("torch", "triton", "numpy"):
        module = sys.modules.get(name)
        location = getattr(module, "__file__", None)
        if location:  # a package imported from outside the prefixes (PYTHONPATH) is needed too
            paths.add(str(Path(location).resolve().parents[1]))
    for bound, _ in dsl_package_paths():
        paths.add(str(bound))
    return sorted({Path(p) for p in paths if p and Path(p).is_dir()}, key=str)


# DSL packages a GPU host may install outside site-packages (`pip install --target DIR`):
# top-level package -> how many folders above its own the install's root is (CuTe DSL keeps
# its shared libraries in nvidia_cutlass_dsl/lib, beside python_packages/cutlass).
DSL_PACKAGES = {"cutlass": 2}


def dsl_package_paths() -> list[tuple[Path, Path]]:
    """(folder to expose read-only, folder for the child's sys.path) for each DSL package the
    worker's interpreter can import from outside its own prefixes and site-packages, and
    each folder the deployment installed kernel libraries in (libraries.library_paths): the
    child runs `python -I`, which sees neither PYTHONPATH nor .pth files of such folders.
    Found without importing the package."""
    inside = [Path(p).resolve() for p in
              (sys.prefix, sys.base_prefix, *site.getsitepackages()) if p]
    found = []
    for name, depth in DSL_PACKAGES.items():
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.origin:
            continue
        package = Path(spec.origin).resolve().parent
        if any(_under(package, folder) for folder in inside):
            continue
        found.append((package.parents[depth - 1], package.parent))
    # the kernel libraries the deployment installed apart from the Python install
    found += [(folder, folder) for folder in library_paths()]
    return found


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _outermost(paths: Iterable[Path]) -> list[Path]:
    unique = sorted(set(paths), key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for path in unique:
        if not any(_under(path, k) for k in kept):
            kept.append(path)
    return kept


def mount_plan(*, readonly: Sequence[Path], masks: Sequence[Path], gpu: bool,
               devices: Sequence[str] = (), tmpfs_bytes: int | None = None) -> list[Op]:
    """The root's steps, in order. `readonly` folders are exposed; `masks` that fall inside
    them are covered; exposed folders inside a covered one are exposed again after it."""
    ops: list[Op] = []
    for top in SYSTEM_TOP_LEVEL:
        path = Path(top)
        if path.is_symlink():
            ops.append(Op("symlink", top, str(path.readlink())))
        elif path.is_dir():
            ops.append(Op("bind_ro", top, top))
    # The private /tmp and /dev/shm come before the exposed folders: a Python install that
    # lives under /tmp (a checkout cloned there, its .venv) is bound on top of the empty
    # tmpfs, not hidden by it (every child failed to start with exit code 127 that way).
    # Each capped: without size= a tmpfs may take half of the host's memory.
    size = f",size={tmpfs_bytes}" if tmpfs_bytes else ""
    ops += [Op("tmpfs", "/dev/shm", mode="1777" + size), Op("tmpfs", "/tmp", mode="1777" + size)]
    exposed = _outermost([Path(p) for p in SYSTEM_DIRS] + list(readonly))
    ops += [Op("bind_ro", str(p), str(p)) for p in exposed if p.is_dir()]
    covered = _outermost(m for m in masks if m.is_dir() and any(_under(m, e) for e in exposed))
    ops += [Op("mask", str(m)) for m in covered]
    again = _outermost(p for p in readonly if any(_under(p, m) and p != m for m in covered))
    ops += [Op("bind_ro", str(p), str(p)) for p in again]
    ops += [Op("bind_ro", f, f) for f in ETC_FILES if Path(f).exists()]
    ops += [Op("device", d, d) for d in (*PLAIN_DEVICES, *devices)]
    ops += [Op("symlink", "/dev/fd", "/proc/self/fd")]
    ops += [Op("symlink", f"/dev/{name}", f"/proc/self/fd/{fd}")
            for fd, name in enumerate(("stdin", "stdout", "stderr"))]
    if gpu:
        ops.append(Op("bind_ro", "/sys", "/sys"))  # the driver reads PCI topology there
    ops += [Op("empty_file", str(CODE / "evaluation" / "__init__.py")),
            Op("bind_ro", str(CODE / "evaluation" / "harness"), str(HARNESS))]
    return ops


def gpu_devices() -> list[str]:
    return sorted(str(p) for p in Path("/dev").glob("nvidia*"))


def mount_step(op: Op) -> str:
    """The shell line that carries out one step of the mount plan (`script` joins them)."""
    target = '"$R"' + shlex.quote(op.target)
    source = shlex.quote(op.source)
    parent = '"$R"' + shlex.quote(str(Path(op.target).parent))
    if op.kind == "symlink":
        return f"mkdir -p {parent} && ln -s {source} {target}"
    if op.kind == "tmpfs":
        return (f"mkdir -p {target} && mount -t tmpfs -o mode={op.mode},nosuid,nodev "
                f"atrex-tmp {target}")
    if op.kind == "mask":
        return f"mount -t tmpfs -o mode=000,size=4k,nosuid,nodev atrex-hidden {target}"
    if op.kind == "empty_file":
        return f"mkdir -p {parent} && : > {target}"
    if op.kind == "device":
        return (f"if [ -d {source} ]; then mkdir -p {target}; mount --rbind {source} {target}; "
                f"else mkdir -p {parent} && : > {target} && mount --bind {source} {target}; fi")
    make = f"mkdir -p {target}" if Path(op.source).is_dir() else f"mkdir -p {parent} && : > {target}"
    flags = "ro,nosuid,nodev" if op.kind == "bind_ro" else "nosuid,nodev"
    return f"{make} && mount --rbind {source} {target} && mount -o remount,bind,{flags} {target}"


def script(paths: JailPaths, plan: Sequence[Op], payload: Sequence[str]) -> str:
    """A POSIX shell script that builds the root, enters it and runs `payload` (as its
    child, not by exec: the script's shell stays as the namespace's init)."""
    lines = [
        "set -eu",
        f"R={shlex.quote(str(paths.mountpoint))}",
        'mount -t tmpfs -o mode=0755,nosuid,nodev,size=16m atrex-root "$R"',
        *(mount_step(op) for op in plan),
        mount_step(Op("bind_rw", str(WORK), str(paths.workdir))),
        mount_step(Op("bind_rw", str(CACHE), str(paths.cache_dir))),
        'mkdir "$R/proc" "$R/.old"',
        'cd "$R"',
        "pivot_root . .old",
        "cd /",
        "mount -t proc -o nosuid,nodev,noexec proc /proc",
        "umount -l /.old",
        "rmdir /.old",
        "mount -o remount,bind,ro,nosuid,nodev /",
        f"cd {shlex.quote(str(WORK))}",
        "status=0",
        shlex.join(payload) + " || status=$?",
        'exit "$status"',
    ]
    return "\n".join(lines) + "\n"
