"""Reading an upload into candidate sources, or rejecting it with a message a team can act on.

An upload is one `.py` for a chosen operator, or a `.zip` / `.tar.gz` of `<operator>.py`
files at the archive's top level. Nothing here touches the database: a rejected upload
leaves no trace, and an accepted one is stored by the caller in one transaction.

Archives are read defensively: declared sizes are not trusted (every read is capped),
gzip output is capped before tar sees it, and links, nested folders, nested archives,
absolute or parent-relative paths and duplicate names are refused.
"""

from __future__ import annotations

import ast
import io
import stat
import tarfile
import threading
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Protocol

from portal.errors import DomainError

_NESTED_ARCHIVE_SUFFIXES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".whl")
_TAR_OVERHEAD_BYTES = 1024 * 1024  # headers and padding allowed on top of the file limits
# CPython 3.11 counts the AST constructor's recursion depth in state shared by all threads; a
# garbage collection inside ast.parse can let another thread parse meanwhile, and the count then
# comes out wrong: "SystemError: AST constructor recursion depth mismatch" (python/cpython
# issue 106905, fixed upstream by PR 113035; the 3.11.7 in use has it). So parallel uploads in
# one web process parse one at a time.
_PARSE_LOCK = threading.Lock()


class UploadRejected(DomainError):
    """A client error (HTTP 400): the message says what is wrong and how to fix it."""


@dataclass(frozen=True)
class UploadLimits:
    max_file_bytes: int = 1024 * 1024
    max_files: int = 64
    max_total_bytes: int = 8 * 1024 * 1024


def read_upload(*, filename: str, data: bytes, operators: Iterable[str], operator: str | None = None,
                limits: UploadLimits = UploadLimits()) -> dict[str, str]:
    """Return {operator name: candidate source} or raise UploadRejected."""
    known = set(operators)
    lowered = filename.lower()
    shown: dict[str, str] = {}  # a renamed file's name in messages: the one the team uploaded
    if lowered.endswith(".py"):
        name = operator or PurePosixPath(filename).stem
        if f"{name}.py" != filename:
            shown[f"{name}.py"] = f"{filename} (as {name}.py)"
        if len(data) > limits.max_file_bytes:
            raise UploadRejected(f"{filename} is {len(data)} bytes; the limit is "
                                 f"{limits.max_file_bytes} bytes per file")
        files = {f"{name}.py": data}
    elif lowered.endswith(".zip"):
        files = _zip_members(data, limits)
    elif lowered.endswith((".tar.gz", ".tgz")):
        files = _tar_members(data, limits)
    else:
        raise UploadRejected(f"{filename}: upload a .py file, or a .zip or .tar.gz of "
                             "<operator>.py files")
    if not files:
        raise UploadRejected(f"{filename} holds no files")
    return {_operator_of(path, known, shown.get(path, path)):
            _checked_source(shown.get(path, path), content) for path, content in files.items()}


def _operator_of(path: str, known: set[str], shown: str) -> str:
    name = path[:-3]
    if name not in known:
        raise UploadRejected(f"{shown}: no operator named '{name}' in this release "
                             f"(operators: {', '.join(sorted(known))})")
    return name


def _checked_source(path: str, content: bytes) -> str:
    try:
        source = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UploadRejected(f"{path} is not UTF-8 text (byte {exc.start})") from None
    if not _defines_model(_parsed(path, source)):
        raise UploadRejected(f"{path} defines no class Model (or ModelNew)")
    return source


def _parsed(path: str, source: str) -> ast.Module:
    """The source's syntax tree; any way the parser can fail is a rejection, never a 500."""
    try:
        with _PARSE_LOCK:
            return ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise UploadRejected(f"{path}: syntax error on line {exc.lineno}: {exc.msg}") from None
    except (RecursionError, MemoryError):
        # What CPython raises for an expression nested (or chained) thousands deep: the parser's
        # own stack overflows (MemoryError) or building the tree recurses too far.
        raise UploadRejected(f"{path} is nested too deeply to be read: split deeply nested or "
                             "very long chained expressions") from None
    except (SystemError, ValueError) as exc:
        raise UploadRejected(f"{path} could not be parsed ({type(exc).__name__}: {exc})") from None


def _defines_model(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in ("Model", "ModelNew"):
            return True
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in ("Model", "ModelNew") for t in node.targets):
            return True
    return False


def _checked_member_name(raw: str) -> str:
    if raw.startswith("/") or "\\" in raw or (len(raw) > 1 and raw[1] == ":"):
        raise UploadRejected(f"{raw}: absolute paths are not allowed in an archive")
    path = PurePosixPath(raw)
    if ".." in path.parts:
        raise UploadRejected(f"{raw}: paths with '..' are not allowed in an archive")
    if len(path.parts) != 1:
        raise UploadRejected(f"{raw}: put <operator>.py files at the archive's top level, "
                             "not in folders")
    name = path.name
    if name.lower().endswith(_NESTED_ARCHIVE_SUFFIXES):
        raise UploadRejected(f"{raw}: archives inside archives are not accepted")
    if not name.endswith(".py"):
        raise UploadRejected(f"{raw}: only <operator>.py files are accepted in an archive")
    return name


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Budget:
    """Counts files and bytes across an archive; every read goes through it."""

    def __init__(self, limits: UploadLimits) -> None:
        self.limits = limits
        self.files = 0
        self.total = 0
        self.names: set[str] = set()

    def admit(self, name: str, declared_size: int) -> None:
        if name in self.names:
            raise UploadRejected(f"{name} appears twice in the archive")
        self.names.add(name)
        self.files += 1
        if self.files > self.limits.max_files:
            raise UploadRejected(f"the archive holds more than {self.limits.max_files} files")
        if declared_size > self.limits.max_file_bytes:
            raise UploadRejected(f"{name} is {declared_size} bytes; the limit is "
                                 f"{self.limits.max_file_bytes} bytes per file")

    def read(self, name: str, stream: _Readable) -> bytes:
        data = stream.read(self.limits.max_file_bytes + 1)
        if len(data) > self.limits.max_file_bytes:
            raise UploadRejected(f"{name} expands beyond {self.limits.max_file_bytes} bytes "
                                 "(a decompression bomb?)")
        self.total += len(data)
        if self.total > self.limits.max_total_bytes:
            raise UploadRejected(f"the archive expands beyond {self.limits.max_total_bytes} "
                                 "bytes in all")
        return bytes(data)


def _zip_members(data: bytes, limits: UploadLimits) -> dict[str, bytes]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise UploadRejected("the .zip file is damaged or not a zip archive") from None
    budget = _Budget(limits)
    files: dict[str, bytes] = {}
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                raise UploadRejected(f"{info.filename}: folders are not accepted; put "
                                     "<operator>.py files at the top level")
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise UploadRejected(f"{info.filename}: symbolic links are not accepted")
            name = _checked_member_name(info.filename)
            budget.admit(name, info.file_size)
            try:
                with archive.open(info) as member:
                    files[name] = budget.read(name, member)
            except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError) as exc:
                raise UploadRejected(f"{name} could not be read from the zip: {exc}") from None
    return files


def _tar_members(data: bytes, limits: UploadLimits) -> dict[str, bytes]:
    # Decompress with a cap first: tarfile would otherwise inflate a gzip bomb in full.
    cap = limits.max_total_bytes + limits.max_files * 1024 + _TAR_OVERHEAD_BYTES
    inflater = zlib.decompressobj(wbits=31)
    try:
        tar_bytes = inflater.decompress(data, cap)
    except zlib.error:
        raise UploadRejected("the .tar.gz file is damaged or not gzip-compressed") from None
    if inflater.unconsumed_tail:
        raise UploadRejected(f"the archive expands beyond {limits.max_total_bytes} bytes in all "
                             "(a decompression bomb?)")
    budget = _Budget(limits)
    files: dict[str, bytes] = {}
    try:
        archive = tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:")  # noqa: SIM115
    except tarfile.TarError:
        raise UploadRejected("the .tar.gz file does not hold a tar archive") from None
    with archive:
        try:
            members = archive.getmembers()
        except tarfile.TarError as exc:
            raise UploadRejected(f"the tar archive is damaged: {exc}") from None
        for info in members:
            if info.issym() or info.islnk():
                raise UploadRejected(f"{info.name}: links are not accepted")
            if info.isdir():
                raise UploadRejected(f"{info.name}: folders are not accepted; put "
                                     "<operator>.py files at the top level")
            if not info.isfile():
                raise UploadRejected(f"{info.name}: only regular files are accepted")
            name = _checked_member_name(info.name)
            budget.admit(name, info.size)
            member = archive.extractfile(info)
            if member is None:
                raise UploadRejected(f"{info.name} could not be read")
            files[name] = budget.read(name, member)
    return files
