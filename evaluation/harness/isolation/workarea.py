"""Folders the trusted parent makes for its sandboxed children, made so that a candidate
cannot turn them against the parent.

The parent runs as root and the candidate does not, yet they share files: the parent writes
the candidate's source and reads back its outputs. Seen in an attack: root wrote
`candidate.py` and chowned work files by path, a candidate planted symlinks where those paths
would be, and root chowned a root-only file to the candidate and overwrote another. Here
every path is opened relative to a folder descriptor with O_NOFOLLOW, files are created with
O_EXCL, ownership is changed on descriptors, and the folders the parent writes into belong
to root, so the candidate cannot plant anything there in the first place.

Each worker process keeps its children's folders in one work area, locked (flock) while the
process lives. A worker killed outright leaves its area behind, with team source and
outputs in it; the next worker to start on the host removes every area whose lock is free.
As root each child's folder is a size-capped tmpfs of its own (child_process.py): removing an
area unmounts what is mounted inside it first.

Imports no Django.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

AREA_PREFIX = "atrex-run-"
LOCK_NAME = ".lock"
# An area without its lock file yet is one being made right now, unless it is this old.
UNLOCKED_GRACE_S = 60.0
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class WorkArea:
    """This process's folder for its children's files; removed when the process exits."""

    def __init__(self, base: Path) -> None:
        sweep_stale_areas(base)
        self.path = Path(tempfile.mkdtemp(prefix=AREA_PREFIX, dir=base))  # 0700, random name
        self._lock_fd = os.open(self.path / LOCK_NAME,
                                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._owner = os.getpid()
        atexit.register(self.remove)

    def remove(self) -> None:
        if os.getpid() != self._owner:
            return  # a forked process: the area belongs to its parent
        remove_tree(self.path)
        with contextlib.suppress(OSError):
            os.close(self._lock_fd)


_areas: dict[tuple[int, Path], WorkArea] = {}


def work_area(base: Path) -> WorkArea:
    """The calling process's area under `base` (made, and stale ones swept, on first use)."""
    key = (os.getpid(), base)
    if key not in _areas:
        _areas[key] = WorkArea(base)
    return _areas[key]


def sweep_stale_areas(base: Path) -> list[Path]:
    """Remove the areas under `base` whose worker is gone (their lock is free)."""
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(AREA_PREFIX) or entry.is_symlink() or not entry.is_dir():
            continue
        try:
            lock = os.open(entry / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                if time.time() - entry.stat().st_mtime > UNLOCKED_GRACE_S:
                    remove_tree(entry)
                    removed.append(entry)
            continue
        except OSError:
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a live worker holds it
        finally:
            os.close(lock)
        remove_tree(entry)
        removed.append(entry)
    return removed


_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2
try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:
    _libc = None


def mount_tmpfs(path: Path, size_bytes: int, mode: int = 0o700) -> None:
    """Mount a tmpfs of at most `size_bytes` on the folder `path` (root only); OSError."""
    if _libc is None:
        raise OSError("no C library to mount with")
    options = f"size={size_bytes},mode={mode:o}".encode()
    if _libc.mount(b"atrex-scratch", str(path).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                   options) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mount tmpfs on {path}: {os.strerror(error)}")


def unmount_below(path: Path) -> None:
    """Detach every mount at or inside `path`, innermost first."""
    if _libc is None:
        return
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return
    root = os.path.realpath(path)
    points = [line.split()[4].encode().decode("unicode_escape") for line in lines]
    inside = [p for p in points if p == root or p.startswith(root + "/")]
    for point in sorted(set(inside), key=len, reverse=True):
        _libc.umount2(point.encode(), _MNT_DETACH)


def remove_tree(path: Path) -> None:
    """Unmount inside `path`, then remove it (rmtree does not follow symlinks)."""
    unmount_below(path)
    shutil.rmtree(path, ignore_errors=True)


def open_dir(path: Path) -> int:
    return os.open(path, _DIR_FLAGS)


def make_dir(parent_fd: int, name: str, mode: int, owner: tuple[int, int] | None = None) -> int:
    """Create `name` in the folder `parent_fd` (never through a link; it must not exist)
    and return a descriptor on it, owned by `owner` when given."""
    _check_name(name)
    os.mkdir(name, mode, dir_fd=parent_fd)
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    if owner is not None:
        os.fchown(fd, *owner)
    os.fchmod(fd, mode)  # not narrowed by the umask
    return fd


def write_file(dir_fd: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """Create `name` (it must not exist, not even as a link) in `dir_fd` and write `data`."""
    _check_name(name)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 mode, dir_fd=dir_fd)
    os.fchmod(fd, mode)  # not narrowed by the umask
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def open_regular(dir_fd: int, name: str) -> BinaryIO:
    """Open a file the candidate wrote, for reading: a plain file named directly in
    `dir_fd`, never a link, a FIFO or a device."""
    _check_name(name)
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                 dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{name} is not a plain file")
    return os.fdopen(fd, "rb")


def _check_name(name: str) -> None:
    if not name or "/" in name or name in (".", "..") or "\0" in name:
        raise ValueError(f"not a plain file name: {name!r}")
