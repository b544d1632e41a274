"""Importing an Atrex-layout release into the catalog, through the harness's loader."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction
from django.db.models import Max

from evaluation.harness.release import HardwareProfile as HardwareSpec
from evaluation.harness.release import Release as LoadedRelease
from evaluation.harness.release import ReleaseError, load_release
from evaluation.models import (
    HardwareProfile,
    Operator,
    OperatorHidden,
    Release,
    ReleaseHidden,
    Shape,
)
from evaluation.traces import TRACE_RULES_FILE, TraceError, parse_rules


@dataclass
class ImportSummary:
    release: Release
    created: bool
    operators: int
    shapes: int
    hardware: list[str]
    warnings: list[str] = field(default_factory=list)


def release_content_sha256(root: Path) -> str:
    """Hash of every file's relative path and bytes: a changed release is a new version."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@transaction.atomic
def release_import(*, path: Path, name: str | None = None) -> ImportSummary:
    """Load, validate and store a release; importing the same content again changes nothing."""
    loaded = load_release(path)  # raises ReleaseError before anything is written
    name = name or loaded.name
    content = release_content_sha256(loaded.root)
    hardware = [hardware_profile_upsert(spec).name for spec in loaded.hardware.values()]
    existing = Release.objects.filter(name=name, content_sha256=content).first()
    if existing is not None:
        return ImportSummary(existing, False, existing.operators.count(),
                             Shape.objects.filter(operator__release=existing).count(), hardware,
                             list(loaded.warnings))
    version = (Release.objects.filter(name=name).aggregate(v=Max("version"))["v"] or 0) + 1
    release = Release.objects.create(
        name=name, version=version, content_sha256=content, dsl=loaded.settings.dsl,
        dsl_ratio_threshold=loaded.settings.dsl_ratio_threshold)
    ReleaseHidden.objects.create(release=release, trace_rules=_trace_rules(loaded), importance={
        op: {"importance_score": e.score, "phase": e.phase, "num_profiles": e.num_profiles}
        for op, e in loaded.importance.items()})
    shapes = 0
    for op in loaded.operators.values():
        directory = op.public.directory
        operator = Operator.objects.create(
            release=release, name=op.name,
            reference_py=(directory / "reference.py").read_text(encoding="utf-8"),
            input_py=(directory / "input.py").read_text(encoding="utf-8"),
            shapes_json=(directory / "shapes.json").read_text(encoding="utf-8"))
        OperatorHidden.objects.create(
            operator=operator, metadata=op.metadata.raw if op.metadata else None,
            roofline=_read_json_text(directory / "roofline.json"),
            atol=op.tolerance.atol, rtol=op.tolerance.rtol)
        Shape.objects.bulk_create(
            Shape(operator=operator, shape_id=s.id, init_kwargs=dict(s.init_kwargs),
                  input_kwargs=dict(s.input_kwargs), position=i)
            for i, s in enumerate(op.public.shapes))
        shapes += len(op.public.shapes)
    return ImportSummary(release, True, len(loaded.operators), shapes, hardware,
                         list(loaded.warnings))


def hardware_profile_upsert(spec: HardwareSpec) -> HardwareProfile:
    profile, _ = HardwareProfile.objects.update_or_create(
        name=spec.name,
        defaults={"arch": spec.arch or "", "peak_flops": dict(spec.peak_flops),
                  "hbm_bytes_per_s": spec.hbm_bytes_per_s, "launch_floor_s": spec.launch_floor_s,
                  "source": dict(spec.source)})
    return profile


def _read_json_text(path: Path) -> object | None:
    import json

    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _trace_rules(loaded: LoadedRelease) -> dict[str, object]:
    """data/trace_rules.json when the release has one (an addition of this project's own
    releases; upstream releases fall back to rules from their metadata's kernel names)."""
    path = loaded.root / "data" / TRACE_RULES_FILE
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        parse_rules(doc, loaded.operators, f"data/{TRACE_RULES_FILE}")
    except json.JSONDecodeError as exc:
        raise ReleaseError(f"data/{TRACE_RULES_FILE}", f"line {exc.lineno}",
                           f"invalid JSON: {exc.msg}") from None
    except TraceError as exc:
        raise ReleaseError(f"data/{TRACE_RULES_FILE}", "rules", str(exc)) from None
    return dict(doc)
