"""Importing an Atrex-layout release into the catalog, through the harness's loader."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Max

from evaluation.catalog.hidden_tier import (
    has_generated_tier,
    keyed_content_sha256,
    release_with_generated_tier,
)
from evaluation.catalog.models import (
    HardwareProfile,
    HardwareProfileVersion,
    Operator,
    OperatorHidden,
    Release,
    ReleaseHidden,
    Shape,
)
from evaluation.harness.release import (
    DTYPE_TO_PEAK_PATH,
    PEAK_PATH_UNIT,
    HardwareSpec,
    LoadedRelease,
    ReleaseError,
    load_release,
    project_hardware_profiles,
)
from evaluation.traces import TRACE_RULES_FILE, TraceError, parse_rules
from portal.errors import DomainError


@dataclass
class ImportSummary:
    release: Release
    created: bool
    operators: int
    shapes: int
    hardware: list[str]
    warnings: list[str] = field(default_factory=list)
    # Per stored profile, how the release's configs/hardware YAML differs from it: reported,
    # never applied (a profile changes only by an admin's new version).
    hardware_differences: dict[str, list[str]] = field(default_factory=dict)
    hidden_shapes: int = 0  # the hidden tier (not counted in `shapes`)


def release_content_sha256(root: Path) -> str:
    """Hash of every file's relative path and bytes: a changed release is a new version."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def release_import(*, path: Path, name: str | None = None,
                   hidden_secret: bytes | None = None) -> ImportSummary:
    """Load, validate and store a release; importing the same content again changes nothing.

    A release whose hidden tier is generated (data/hidden_tier.json) gets it from
    `hidden_secret` (evaluation/catalog/hidden_tier.py); without one it has none, and the
    summary warns. The same secret gives the same tier and the same content hash."""
    if hidden_secret is None:
        summary = _release_import(path=path, name=name, content=release_content_sha256(path))
        if has_generated_tier(path):
            summary.warnings.insert(0, "no hidden tier: this release's hidden shapes are drawn "
                                    "from a secret at import, and none was given "
                                    "(--hidden-secret-file; docs/admins.md)")
        return summary
    with release_with_generated_tier(path, hidden_secret) as generated:
        return _release_import(path=generated.root, name=name,
                               content=keyed_content_sha256(release_content_sha256(path),
                                                            hidden_secret))


@transaction.atomic
def _release_import(*, path: Path, name: str | None, content: str) -> ImportSummary:
    loaded = load_release(path)  # raises ReleaseError before anything is written
    name = name or loaded.name
    profiles, differences = [], {}
    for spec in loaded.hardware.values():
        profile, changes = hardware_profile_from_release(spec, release=name)
        profiles.append(profile)
        if changes:
            differences[profile.name] = changes
    _check_stored_profiles_cover(loaded, profiles)
    hardware = [profile.name for profile in profiles]
    existing = Release.objects.filter(name=name, content_sha256=content).first()
    if existing is not None:
        return ImportSummary(existing, False, existing.operators.count(),
                             Shape.objects.filter(operator__release=existing).count(), hardware,
                             list(loaded.warnings), differences,
                             hidden_shapes=loaded.hidden_shape_count)
    version = (Release.objects.filter(name=name).aggregate(v=Max("version"))["v"] or 0) + 1
    release = Release.objects.create(
        name=name, version=version, content_sha256=content, dsl=loaded.settings.dsl,
        dsls=list(loaded.settings.accepted_dsls),
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
        tiers = [(s, False) for s in op.public.shapes] + [(s, True) for s in op.hidden_shapes]
        Shape.every_tier.bulk_create(
            Shape(operator=operator, shape_id=s.id, init_kwargs=dict(s.init_kwargs),
                  input_kwargs=dict(s.input_kwargs), position=i, hidden=hidden)
            for i, (s, hidden) in enumerate(tiers))
        shapes += len(op.public.shapes)
    return ImportSummary(release, True, len(loaded.operators), shapes, hardware,
                         list(loaded.warnings), differences,
                         hidden_shapes=loaded.hidden_shape_count)


class HardwareProfileError(DomainError):
    """A hardware profile's figures that cannot be stored: says which and why."""


def hardware_profile_from_release(spec: HardwareSpec, *, release: str,
                                  origin: str | None = None) -> tuple[HardwareProfile, list[str]]:
    """The stored profile `spec` names, created (as its version 1) when there is none.

    An existing profile is never changed by an import: every release and every stored
    result share it. Where the release's YAML differs, the differences are returned, for the
    admin to apply or not (leaderboard/hardware.py `hardware_profile_update`).
    """
    figures = {"arch": spec.arch or "", "peak_flops": dict(spec.peak_flops),
               "hbm_bytes_per_s": spec.hbm_bytes_per_s, "launch_floor_s": spec.launch_floor_s,
               "source": dict(spec.source)}
    profile, created = HardwareProfile.objects.get_or_create(
        name=spec.name, defaults={**figures, "version": 1})
    if created:
        HardwareProfileVersion.objects.create(
            profile=profile, version=1, **figures,
            note=origin or f"created by importing release {release} (configs/hardware)")
        return profile, []
    return profile, hardware_differences(profile.as_spec(), spec)


@dataclass(frozen=True)
class HardwareImport:
    profile: HardwareProfile
    created: bool
    differences: list[str]  # what the YAML would change in a profile already stored


def project_hardware_import() -> list[HardwareImport]:
    """The project's own profiles (evaluation/hardware: H200, H100, H20, MI300X) stored where
    the portal has none of that name yet; a stored one is never changed (as by an import).

    A release in the upstream layout brings only its own SKUs (the public Atrex-Bench:
    XPU-A and XPU-B); without these, nothing of it could be evaluated on an H200.
    """
    imported = []
    with transaction.atomic():
        for spec in project_hardware_profiles().values():
            existed = HardwareProfile.objects.filter(name=spec.name).exists()
            profile, differences = hardware_profile_from_release(
                spec, release="", origin="created from the project's profiles (evaluation/hardware)")
            imported.append(HardwareImport(profile, not existed, differences))
    return imported


def hardware_profile_version_create(*, profile: HardwareProfile, figures: HardwareSpec,
                                    source: Mapping[str, Any], author: Any,
                                    note: str) -> HardwareProfileVersion:
    """`figures` (validated) as the profile's next version, made current.

    The caller holds the profile row's lock (select_for_update): versions are numbered
    one after the other.
    """
    if not profile.versions.filter(version=profile.version).exists():
        # A profile made outside an import (a script, a test): keep its figures as history.
        HardwareProfileVersion.objects.create(
            profile=profile, version=profile.version, arch=profile.arch,
            peak_flops=profile.peak_flops, hbm_bytes_per_s=profile.hbm_bytes_per_s,
            launch_floor_s=profile.launch_floor_s, source=profile.source,
            note="recorded when the next version was made")
    latest = profile.versions.aggregate(v=Max("version"))["v"] or 0
    values = {"arch": figures.arch or "", "peak_flops": dict(figures.peak_flops),
              "hbm_bytes_per_s": figures.hbm_bytes_per_s,
              "launch_floor_s": figures.launch_floor_s, "source": dict(source)}
    version = HardwareProfileVersion.objects.create(
        profile=profile, version=latest + 1, author=author if getattr(author, "pk", None)
        else None, note=note, **values)
    HardwareProfile.objects.filter(pk=profile.pk).update(version=version.version, **values)
    profile.refresh_from_db()
    return version


def hardware_differences(stored: HardwareSpec, other: HardwareSpec) -> list[str]:
    """What `other` would change in `stored`, one line per figure (source notes aside)."""
    def shown(value: float | str | None) -> str:
        if value is None or value == "":
            return "none"
        return value if isinstance(value, str) else f"{value:.6g}"

    changes = []
    if (stored.arch or None) != (other.arch or None):
        changes.append(f"arch: stored {shown(stored.arch)}, release {shown(other.arch)}")
    for path in sorted(set(stored.peak_flops) | set(other.peak_flops)):
        mine, theirs = stored.peak_flops.get(path), other.peak_flops.get(path)
        if mine is None or theirs is None or float(mine) != float(theirs):
            changes.append(f"p_peak.{path}: stored {shown(mine)}, release {shown(theirs)}")
    for label, mine_value, theirs_value in (
            ("b_peak.hbm", stored.hbm_bytes_per_s, other.hbm_bytes_per_s),
            ("launch.floor_s", stored.launch_floor_s, other.launch_floor_s)):
        if float(mine_value) != float(theirs_value):
            changes.append(f"{label}: stored {shown(mine_value)}, release {shown(theirs_value)}")
    return changes


def hardware_figures_check(*, name: str, peak_flops: Mapping[str, Any], hbm_bytes_per_s: Any,
                           launch_floor_s: Any, arch: Any) -> HardwareSpec:
    """Figures an admin proposes for a profile, validated; HardwareProfileError otherwise."""
    if not isinstance(peak_flops, Mapping) or not peak_flops:
        raise HardwareProfileError(f"{name}: p_peak: at least one precision path is needed")
    unknown = sorted(str(path) for path in peak_flops if path not in PEAK_PATH_UNIT)
    if unknown:
        raise HardwareProfileError(f"{name}: p_peak.{unknown[0]}: unknown precision path "
                                   f"(known: {', '.join(PEAK_PATH_UNIT)})")
    peaks = {str(path): _positive(value, f"{name}: p_peak.{path}")
             for path, value in peak_flops.items()}
    hbm = _positive(hbm_bytes_per_s, f"{name}: b_peak.hbm")
    floor = _number(launch_floor_s, f"{name}: launch.floor_s")
    if floor < 0:
        raise HardwareProfileError(f"{name}: launch.floor_s: must not be negative (got {floor})")
    if not isinstance(arch, str) or len(arch) > 50:
        raise HardwareProfileError(f"{name}: arch: must be text of at most 50 characters")
    return HardwareSpec(name=name, arch=arch or None, peak_flops=peaks, hbm_bytes_per_s=hbm,
                        launch_floor_s=floor)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise HardwareProfileError(f"{where}: must be a finite number (got {value!r})")
    return float(value)


def _positive(value: Any, where: str) -> float:
    number = _number(value, where)
    if number <= 0:
        raise HardwareProfileError(f"{where}: must be positive (got {number:g})")
    return number


def peak_paths_in_use() -> dict[str, str]:
    """Precision path -> the first stored roofline shape whose W needs it (where to look)."""
    needed: dict[str, str] = {}
    rows = (OperatorHidden.objects.exclude(roofline=None)
            .select_related("operator__release").order_by("operator__release", "operator__name"))
    for hidden in rows:
        for shape_id, entry in sorted(((hidden.roofline or {}).get("shapes") or {}).items()):
            for dtype in entry.get("semantic_W_flops") or {}:
                path = DTYPE_TO_PEAK_PATH.get(dtype)
                if path is not None:
                    needed.setdefault(path, f"{hidden.operator.release} "
                                            f"{hidden.operator.name}/{shape_id}")
    return needed


def _check_stored_profiles_cover(loaded: LoadedRelease, profiles: list[HardwareProfile]) -> None:
    """The stored profiles, not the release's YAML, give the SOL: they need every precision
    path the release's W uses (the loader checked the YAML's only)."""
    needed: dict[str, str] = {}
    for op in loaded.operators.values():
        for shape_id, shape in sorted((op.roofline or {}).items()):
            for dtype in shape.w_flops:
                needed.setdefault(DTYPE_TO_PEAK_PATH[dtype],
                                  f"data/{op.name}/roofline.json shapes.{shape_id}")
    for profile in profiles:
        for path, where in sorted(needed.items()):
            if path not in profile.peak_flops:
                raise ReleaseError(
                    f"hardware profile {profile.name} v{profile.version} (stored)",
                    f"p_peak.{path}", f"missing, needed by {where}; an import never changes a "
                    f"stored profile: add the path with `manage.py hardware_profile "
                    f"{profile.name} --peak {path}=FLOPS`")


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
