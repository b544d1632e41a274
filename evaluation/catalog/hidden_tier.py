"""A release's hidden tier generated at import from a secret the admin holds.

A release may ship the rules of its hidden tier instead of its shapes (data/hidden_tier.json,
the starter's: evaluation/release_tools/make_starter_hidden_shapes.py). The shapes are then
drawn from the admin's secret at import (`manage.py import_release PATH --hidden-secret-file
FILE`) into a temporary copy of the release, with their W and Q in the copy's roofline.json,
and stored by the import like a hidden_shapes.json's; the release folder, and so the
repository, never holds them. Without the secret the release imports without a hidden tier.

The secret also keys the release's content hash (shown on the home page), so the hash is no
oracle for guesses of the hidden sizes, and a new secret is a new release version.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluation.harness.release import HIDDEN_SHAPES_FILE, ReleaseError, load_hardware_dir
from evaluation.release_tools.make_starter_hidden_shapes import (
    HiddenTierError,
    generate,
    parse_rules,
    roofline_entries,
)

RULES_FILE = "hidden_tier.json"  # in the release's data/ folder
MIN_SECRET_BYTES = 16


class HiddenSecretError(ValueError):
    """The secret file cannot be used: says why."""


def read_secret(path: Path) -> bytes:
    """The secret in `path`: at least 16 bytes (surrounding whitespace aside), readable by its
    owner alone (as ssh asks of a private key), since whoever reads it can compute the tier."""
    try:
        mode = path.stat().st_mode
        secret = path.read_bytes().strip()
    except OSError as exc:
        raise HiddenSecretError(f"{path}: {exc.strerror or exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise HiddenSecretError(f"{path}: readable by others (mode {stat.S_IMODE(mode):o}); "
                                f"chmod 600 {path}")
    if len(secret) < MIN_SECRET_BYTES:
        raise HiddenSecretError(f"{path}: shorter than {MIN_SECRET_BYTES} bytes")
    return secret


def secret_file_create(path: Path) -> bytes:
    """A new random secret written to `path` (0600, never replacing one); returned."""
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(32).encode()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(secret + b"\n")
    return secret


def secret_file_ensure(path: Path) -> bytes:
    """The secret in `path`, made first when there is none (a demo's set-up)."""
    if not path.exists():
        return secret_file_create(path)
    return read_secret(path)


def keyed_content_sha256(content_sha256: str, secret: bytes) -> str:
    """The release's content hash with its generated tier: the files' hash, keyed by the
    secret (the same secret: the same hash; without it, nothing to check a guess against)."""
    key = hmac.new(secret, b"atrex hidden tier: content", hashlib.sha256).hexdigest()
    return hashlib.sha256(f"{content_sha256}:{key}".encode()).hexdigest()


def has_generated_tier(root: Path) -> bool:
    return (root / "data" / RULES_FILE).is_file()


@dataclass(frozen=True)
class GeneratedTier:
    root: Path  # the copy to load: the release with its hidden tier written in
    shapes: int


@contextmanager
def release_with_generated_tier(root: Path, secret: bytes) -> Iterator[GeneratedTier]:
    """A temporary copy of the release at `root` with the hidden tier its rules draw from
    `secret` (hidden_shapes.json and the roofline entries per operator), removed on exit."""
    rules_path = root / "data" / RULES_FILE
    if not rules_path.is_file():
        raise ReleaseError(f"data/{RULES_FILE}", "", "missing: this release has no generated "
                           "hidden tier, so a hidden secret has nothing to generate")
    shipped = sorted(p.parent.name for p in (root / "data").glob(f"*/{HIDDEN_SHAPES_FILE}"))
    if shipped:
        raise ReleaseError(f"data/{shipped[0]}/{HIDDEN_SHAPES_FILE}", "", "a release whose "
                           "hidden tier is generated ships no hidden shapes of its own")
    with tempfile.TemporaryDirectory(prefix="atrex-hidden-tier-") as folder:
        copy = Path(folder) / root.resolve().name  # the release's name
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
        os.chmod(folder, 0o700)
        try:
            rules = parse_rules(json.loads(rules_path.read_text(encoding="utf-8")))
            public = {operator: _json(copy / "data" / operator / "shapes.json")
                      for operator in rules if (copy / "data" / operator).is_dir()}
            tier = generate(rules, public, secret)
        except (HiddenTierError, json.JSONDecodeError) as exc:
            raise ReleaseError(f"data/{RULES_FILE}", "", str(exc)) from None
        peaks = load_hardware_dir(copy / "configs" / "hardware")
        for operator, shapes in tier.items():
            directory = copy / "data" / operator
            (directory / HIDDEN_SHAPES_FILE).write_text(json.dumps(shapes), encoding="utf-8")
            roofline_path = directory / "roofline.json"
            roofline = _json(roofline_path) if roofline_path.exists() else {}
            try:
                entries = roofline_entries(operator, shapes, peaks)
            except HiddenTierError as exc:
                raise ReleaseError(f"data/{RULES_FILE}", "", str(exc)) from None
            listed = roofline.get("shapes")
            roofline["shapes"] = {**(listed if isinstance(listed, dict) else {}), **entries}
            roofline_path.write_text(json.dumps(roofline), encoding="utf-8")
        yield GeneratedTier(root=copy, shapes=sum(len(s) for s in tier.values()))


def _json(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise ReleaseError(path.name, "", "expected a JSON object")
    return document
