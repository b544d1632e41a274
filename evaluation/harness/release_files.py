"""A release's files read and checked, every problem a ReleaseError naming the file and the
field: JSON read with its line named, values of the type a field needs, the class or
function a Python file must define, and a shape's keyword arguments against the signature
that receives them (read from the source, never run).
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ReleaseError(Exception):
    """A release file is missing or malformed. Names the file and the field."""

    def __init__(self, file: str, field: str, message: str) -> None:
        self.file = file
        self.field = field
        self.message = message
        where = f"{file}: {field}" if field else file
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Signature:
    """What a function accepts as keyword arguments, read from its source (never run)."""

    names: frozenset[str]
    required: frozenset[str]
    any_keyword: bool  # takes **kwargs

    @classmethod
    def of(cls, node: ast.FunctionDef) -> Signature:
        args = node.args
        positional = [a.arg for a in [*args.posonlyargs, *args.args]]
        if positional and positional[0] in ("self", "cls"):
            positional = positional[1:]
        with_default = set(positional[len(positional) - len(args.defaults):]) if args.defaults \
            else set()
        keyword_only = {a.arg for a in args.kwonlyargs}
        keyword_defaults = {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults,
                                                  strict=True) if d is not None}
        names = frozenset(positional) | keyword_only
        return cls(names=names,
                   required=frozenset(names - with_default - keyword_defaults),
                   any_keyword=args.kwarg is not None)


def _check_call(signature: Signature, kwargs: Mapping[str, Any], file: str, field: str,
                callee: str) -> None:
    """A shape's kwargs must fit the function that receives them: import-time, static."""
    if not signature.any_keyword:
        unknown = sorted(set(kwargs) - signature.names)
        if unknown:
            raise ReleaseError(file, f"{field}.{unknown[0]}", f"not a parameter of {callee} "
                               f"(it takes {', '.join(sorted(signature.names)) or 'none'})")
    missing = sorted(signature.required - set(kwargs))
    if missing:
        raise ReleaseError(file, field, f"missing {', '.join(missing)}, required by {callee}")


def _model_init(model: ast.ClassDef, module: ast.Module) -> ast.FunctionDef | None:
    """Model.__init__, or that of a base class defined in the same file; None when the
    constructor comes from elsewhere (then it cannot be checked statically)."""
    classes = {n.name: n for n in module.body if isinstance(n, ast.ClassDef)}
    seen: set[str] = set()
    current: ast.ClassDef | None = model
    while current is not None and current.name not in seen:
        seen.add(current.name)
        for node in current.body:
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                return node
        bases = [b.id for b in current.bases if isinstance(b, ast.Name)]
        local = [classes[b] for b in bases if b in classes]
        if not local:
            if all(isinstance(b, ast.Attribute) and b.attr == "Module" for b in current.bases):
                # nn.Module's own constructor takes no arguments.
                return ast.parse("def __init__(self): pass").body[0]  # type: ignore[return-value]
            return None
        current = local[0]
    return None


def _check_defines(path: Path, root: Path, kind: str, name: str) -> ast.AST:
    file = _rel(path, root)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=file)
    except SyntaxError as exc:
        raise ReleaseError(file, f"line {exc.lineno}", f"syntax error: {exc.msg}") from None
    node_type = ast.ClassDef if kind == "class" else ast.FunctionDef
    for node in tree.body:
        if isinstance(node, node_type) and node.name == name:
            return node
    raise ReleaseError(file, name, f"must define {kind} {name}")


def _read_json(path: Path, root: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReleaseError(_rel(path, root), f"line {exc.lineno}", f"invalid JSON: {exc.msg}") from None


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _require_mapping(value: Any, file: str, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ReleaseError(file, field or "(top level)", "must be a JSON/YAML object")
    return value


def _require_str(value: Any, file: str, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ReleaseError(file, field, "must be a non-empty string")
    return value


def _require_nonnegative(value: Any, file: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0:
        raise ReleaseError(file, field, f"must be a non-negative number (got {value!r})")
    return float(value)


def _require_positive(value: Any, file: str, field: str) -> float:
    number = _require_nonnegative(value, file, field)
    if number == 0:
        raise ReleaseError(file, field, "must be positive")
    return number
