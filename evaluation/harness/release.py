"""Loading and validating benchmark releases in the Atrex-Bench layout.

The layout is fixed by the public benchmark (see shared/BENCHMARK-FORMAT.md):
``data/<operator>/{reference.py,input.py,shapes.json}`` are public,
``metadata.json`` and ``roofline.json`` are hidden, ``data/operator_importance.json``
holds importance weights and ``configs/hardware/*.yaml`` the peak profiles.

Every validation error names the file (relative to the release root) and the field,
so an admin can fix a release without reading this code.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .dsl import KNOWN_DSLS, SUPPORTED_DSLS

# The error loading a release raises, exported from here (release_files.py defines it)
from .release_files import ReleaseError as ReleaseError
from .release_files import (
    Signature,
    _check_call,
    _check_defines,
    _model_init,
    _read_json,
    _rel,
    _require_mapping,
    _require_nonnegative,
    _require_positive,
    _require_str,
)

# W's dtype keys map to a hardware precision path (BENCHMARK-FORMAT.md).
DTYPE_TO_PEAK_PATH: Mapping[str, str] = {
    "bf16": "bf16_tc",
    "fp16": "fp16_tc",
    "fp8_e4m3": "fp8_e4m3_tc",
    "fp8_e5m2": "fp8_e5m2_tc",
    "fp32_tf32": "fp32_tf32_tc",
    "fp32": "fp32_strict",
}
# How the compute times of a shape's precision paths combine: roofline.json's top-level
# "compute_overlap". "sum" (the default: Atrex-Bench's formula, kept for the releases it
# publishes) adds every path's time. "max" lets different execution units overlap, as they do on
# Hopper (tensor cores, CUDA cores and SFUs, TMA and HBM work concurrently): paths on one unit
# still add up, and the compute time is the longest unit's. Only "max" is a lower bound on the
# time of a kernel that does W at peak on each unit.
COMPUTE_OVERLAP_SUM = "sum"
COMPUTE_OVERLAP_MAX = "max"
COMPUTE_OVERLAPS = (COMPUTE_OVERLAP_SUM, COMPUTE_OVERLAP_MAX)
# The unit that runs each precision path: every tensor-core path shares the tensor cores.
PEAK_PATH_UNIT: Mapping[str, str] = {
    "bf16_tc": "tensor_core",
    "fp16_tc": "tensor_core",
    "fp8_e4m3_tc": "tensor_core",
    "fp8_e5m2_tc": "tensor_core",
    "fp32_tf32_tc": "tensor_core",
    "fp32_strict": "cuda_core",
}
DEFAULT_ATOL = 1e-2
DEFAULT_RTOL = 5e-2
DEFAULT_DSL = "triton"
DEFAULT_DSL_RATIO_THRESHOLD = 0.95
# A graph-replayed kernel cannot finish faster than this; hardware YAMLs may override
# it with `launch: {floor_s: ...}` (the upstream YAMLs do not carry the key).
DEFAULT_LAUNCH_FLOOR_S = 2.0e-6
PUBLIC_FILES = ("reference.py", "input.py", "shapes.json")
# A release may hold shapes teams never see (the hidden tier): hidden_shapes.json beside
# shapes.json, in its format, with ids of its own; roofline.json covers both. The public
# Atrex-Bench has none (it publishes all its shapes).
HIDDEN_SHAPES_FILE = "hidden_shapes.json"


@dataclass(frozen=True)
class HardwareSpec:
    name: str
    arch: str | None
    peak_flops: Mapping[str, float]  # precision path -> FLOP/s (dense)
    hbm_bytes_per_s: float
    launch_floor_s: float
    source: Mapping[str, Any] = field(default_factory=dict)

    def ridge_point(self, path: str) -> float:
        """Arithmetic intensity (FLOP/B) above which a kernel on `path` is compute-bound."""
        return self.peak_flops[path] / self.hbm_bytes_per_s


@dataclass(frozen=True)
class ShapeSpec:
    id: str
    init_kwargs: Mapping[str, Any]
    input_kwargs: Mapping[str, Any]


@dataclass(frozen=True)
class ShapeRoofline:
    """Semantic work and traffic of one shape (hidden: roofline.json)."""

    w_flops: Mapping[str, int]  # W dtype key -> FLOPs
    q_read_bytes: int
    q_write_bytes: int
    sol_ms: Mapping[str, float | None] = field(default_factory=dict)
    compute_overlap: str = COMPUTE_OVERLAP_SUM  # the file's convention (COMPUTE_OVERLAPS)

    @classmethod
    def from_json(cls, entry: Mapping[str, Any],
                  document: Mapping[str, Any] | None = None) -> ShapeRoofline:
        """One shape of a roofline.json (`document["shapes"][id]`, already validated), under
        the convention the whole file declares (`document["compute_overlap"]`, absent: sum)."""
        return cls(
            w_flops={k: int(v) for k, v in entry["semantic_W_flops"].items()},
            q_read_bytes=int(entry["semantic_Q_read_bytes"]),
            q_write_bytes=int(entry["semantic_Q_write_bytes"]),
            sol_ms=dict(entry.get("SOL_time_ms") or {}),
            compute_overlap=parse_compute_overlap(document or {}, "roofline.json"),
        )


def stored_shape_roofline(document: Mapping[str, Any] | None,
                          shape_id: str) -> ShapeRoofline | None:
    """One shape's roofline from a stored roofline.json document: the one place the hidden
    file is read back (None when the document or the shape is missing)."""
    entry = ((document or {}).get("shapes") or {}).get(shape_id)
    return ShapeRoofline.from_json(entry, document) if entry else None


def parse_compute_overlap(document: Mapping[str, Any], file: str) -> str:
    """A roofline.json's declared way of combining compute times (COMPUTE_OVERLAPS)."""
    value = document.get("compute_overlap", COMPUTE_OVERLAP_SUM)
    if value not in COMPUTE_OVERLAPS:
        raise ReleaseError(file, "compute_overlap",
                           f"must be one of {', '.join(COMPUTE_OVERLAPS)} (got {value!r})")
    return str(value)


@dataclass(frozen=True)
class Tolerance:
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL


@dataclass(frozen=True)
class OperatorMetadata:
    """Hidden provenance (metadata.json). Every field but id and dtype is optional."""

    id: str
    dtype: str
    status: str | None
    phase: str | None
    importance_score: float | None
    tolerance: Tolerance
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class PublicOperator:
    """What a GPU host and the sandboxed candidate may see of one operator."""

    name: str
    directory: Path
    shapes: tuple[ShapeSpec, ...]

    def shape(self, shape_id: str) -> ShapeSpec:
        for spec in self.shapes:
            if spec.id == shape_id:
                return spec
        raise KeyError(shape_id)


@dataclass(frozen=True)
class Operator:
    public: PublicOperator
    metadata: OperatorMetadata | None
    roofline: Mapping[str, ShapeRoofline] | None
    hidden_shapes: tuple[ShapeSpec, ...] = ()  # the hidden tier (HIDDEN_SHAPES_FILE)

    @property
    def name(self) -> str:
        return self.public.name

    @property
    def tolerance(self) -> Tolerance:
        return self.metadata.tolerance if self.metadata else Tolerance()


@dataclass(frozen=True)
class ImportanceEntry:
    score: float
    phase: str | None
    num_profiles: int | None


@dataclass(frozen=True)
class ReleaseSettings:
    """Optional `release.json` at the root; upstream releases have none."""

    dsl: str = DEFAULT_DSL
    dsl_ratio_threshold: float = DEFAULT_DSL_RATIO_THRESHOLD
    dsls: tuple[str, ...] = ()  # the DSLs a submission may declare; () = every supported

    @property
    def accepted_dsls(self) -> tuple[str, ...]:
        return self.dsls or accepted_by_default(self.dsl)


@dataclass(frozen=True)
class LoadedRelease:
    root: Path
    name: str
    settings: ReleaseSettings
    operators: Mapping[str, Operator]
    importance: Mapping[str, ImportanceEntry]
    hardware: Mapping[str, HardwareSpec]
    warnings: tuple[str, ...]

    @property
    def has_hidden_files(self) -> bool:
        return any(op.metadata or op.roofline or op.hidden_shapes
                   for op in self.operators.values())

    @property
    def hidden_shape_count(self) -> int:
        return sum(len(op.hidden_shapes) for op in self.operators.values())

    def operator(self, name: str) -> Operator:
        try:
            return self.operators[name]
        except KeyError:
            known = ", ".join(sorted(self.operators))
            raise ReleaseError("data", name, f"no such operator (known: {known})") from None


def load_release(root: Path | str) -> LoadedRelease:
    """Read and validate a whole release directory."""
    root = Path(root).resolve()
    data = root / "data"
    if not data.is_dir():
        raise ReleaseError("data/", "", f"missing: {root} is not an Atrex-layout release")
    warnings: list[str] = []
    operators = {}
    for directory in sorted(p for p in data.iterdir() if p.is_dir()):
        operators[directory.name] = load_operator(directory, root, warnings)
    if not operators:
        raise ReleaseError("data/", "", "no operator folders")
    importance = _load_importance(root, set(operators), warnings)
    hardware = load_hardware_dir(root / "configs" / "hardware", root)
    _check_sol_computable(operators, hardware, root)
    return LoadedRelease(
        root=root,
        name=root.name,
        settings=_load_settings(root),
        operators=operators,
        importance=importance,
        hardware=hardware,
        warnings=tuple(warnings),
    )


def _check_sol_computable(operators: Mapping[str, Operator],
                          hardware: Mapping[str, HardwareSpec], root: Path) -> None:
    """Every W dtype needs its precision path on every hardware profile: no silent default."""
    for op in operators.values():
        for shape_id, shape in (op.roofline or {}).items():
            for dtype in shape.w_flops:
                path = DTYPE_TO_PEAK_PATH[dtype]
                for profile in hardware.values():
                    if path not in profile.peak_flops:
                        raise ReleaseError(
                            f"configs/hardware ({profile.name})", f"p_peak.{path}",
                            f"missing, needed by data/{op.name}/roofline.json "
                            f"shapes.{shape_id} (W dtype {dtype})")


def load_operator(directory: Path, root: Path, warnings: list[str]) -> Operator:
    public = load_public_operator(directory, root)
    metadata_path = directory / "metadata.json"
    roofline_path = directory / "roofline.json"
    metadata = _parse_metadata(metadata_path, root) if metadata_path.exists() else None
    roofline = _parse_roofline(roofline_path, root) if roofline_path.exists() else None
    hidden = _load_hidden_shapes(directory, root, public)
    ids = [s.id for s in (*public.shapes, *hidden)]
    if hidden and roofline is None:
        raise ReleaseError(_rel(roofline_path, root), "", f"missing: {HIDDEN_SHAPES_FILE} needs "
                           "the W and Q of its shapes too")
    if roofline is not None:
        _check_same_ids(ids, roofline, _rel(roofline_path, root), "shapes")
    if metadata is not None and isinstance(metadata.raw.get("shapes"), dict):
        _check_same_ids(ids, metadata.raw["shapes"], _rel(metadata_path, root), "shapes",
                        all_required=False)
    return Operator(public=public, metadata=metadata, roofline=roofline, hidden_shapes=hidden)


def _load_hidden_shapes(directory: Path, root: Path,
                        public: PublicOperator) -> tuple[ShapeSpec, ...]:
    """The hidden tier: shapes.json's format, every id new, every call valid for the
    operator's public files (the job runs them with those files)."""
    path = directory / HIDDEN_SHAPES_FILE
    if not path.exists():
        return ()
    shapes = _parse_shapes(path, root)
    file = _rel(path, root)
    public_ids = {s.id for s in public.shapes}
    for shape in shapes:
        if shape.id in public_ids:
            raise ReleaseError(file, shape.id, "the id of a public shape in shapes.json: a hidden "
                               "shape needs an id of its own")
    _check_shape_calls(directory, root, shapes, file)
    return shapes


def _check_same_ids(ids: list[str], entries: Mapping[str, Any], file: str, field: str,
                    all_required: bool = True) -> None:
    """Hidden files describe exactly the shapes of shapes.json (metadata may omit some)."""
    extra = sorted(set(entries) - set(ids))
    if extra:
        raise ReleaseError(file, f"{field}.{extra[0]}", "no such shape id in shapes.json")
    missing = [i for i in ids if i not in entries]
    if all_required and missing:
        raise ReleaseError(file, f"{field}.{missing[0]}", "missing: every shape in shapes.json "
                           "needs its W and Q")


def load_public_operator(directory: Path, root: Path | None = None) -> PublicOperator:
    """Load only the public files of an operator (all a GPU host ever gets)."""
    root = root or directory.parent
    for name in PUBLIC_FILES:
        if not (directory / name).is_file():
            raise ReleaseError(_rel(directory / name, root), "", "missing public file")
    shapes = _parse_shapes(directory / "shapes.json", root)
    _check_shape_calls(directory, root, shapes, _rel(directory / "shapes.json", root))
    return PublicOperator(name=directory.name, directory=directory, shapes=shapes)


def _check_shape_calls(directory: Path, root: Path, shapes: tuple[ShapeSpec, ...],
                       shapes_file: str) -> None:
    """Each shape's kwargs fit _make_inputs in input.py and Model.__init__ in reference.py."""
    model = _check_defines(directory / "reference.py", root, "class", "Model")
    make_inputs = _check_defines(directory / "input.py", root, "function", "_make_inputs")
    assert isinstance(make_inputs, ast.FunctionDef) and isinstance(model, ast.ClassDef)
    init = _model_init(model, ast.parse((directory / "reference.py").read_text(encoding="utf-8")))
    for shape in shapes:
        _check_call(Signature.of(make_inputs), shape.input_kwargs, shapes_file,
                    f"{shape.id}.input_kwargs", "_make_inputs in input.py")
        if init is not None:
            _check_call(Signature.of(init), shape.init_kwargs, shapes_file,
                        f"{shape.id}.init_kwargs", "Model.__init__ in reference.py")


def load_hardware_dir(directory: Path, root: Path | None = None) -> dict[str, HardwareSpec]:
    profiles: dict[str, HardwareSpec] = {}
    if not directory.is_dir():
        return profiles
    for path in sorted(directory.glob("*.yaml")):
        profile = load_hardware_profile(path, root or directory)
        profiles[profile.name] = profile
    return profiles


def load_hardware_profile(path: Path, root: Path | None = None) -> HardwareSpec:
    file = _rel(path, root or path.parent)
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ReleaseError(file, "", f"invalid YAML: {exc}") from None
    doc = _require_mapping(doc, file, "")
    hw = _require_mapping(doc.get("hardware"), file, "hardware")
    name = _require_str(hw.get("name"), file, "hardware.name")
    peaks = _require_mapping(doc.get("p_peak"), file, "p_peak")
    peak_flops = {k: _require_positive(v, file, f"p_peak.{k}") for k, v in peaks.items()}
    b_peak = _require_mapping(doc.get("b_peak"), file, "b_peak")
    hbm = _require_positive(b_peak.get("hbm"), file, "b_peak.hbm")
    launch = doc.get("launch") or {}
    floor = _require_mapping(launch, file, "launch").get("floor_s", DEFAULT_LAUNCH_FLOOR_S)
    return HardwareSpec(
        name=name,
        arch=hw.get("arch"),
        peak_flops=peak_flops,
        hbm_bytes_per_s=hbm,
        launch_floor_s=_require_nonnegative(floor, file, "launch.floor_s"),
        source=doc.get("source") or {},
    )


def project_hardware_profiles() -> dict[str, HardwareSpec]:
    """The project's own copy of the hardware profiles (evaluation/hardware)."""
    return load_hardware_dir(Path(__file__).resolve().parent.parent / "hardware")


# --- parsing helpers -------------------------------------------------------------------


def _parse_shapes(path: Path, root: Path) -> tuple[ShapeSpec, ...]:
    file = _rel(path, root)
    return parse_shapes_document(_read_json(path, root), file)


def parse_shapes_document(document: Any, file: str) -> tuple[ShapeSpec, ...]:
    """shapes.json's format, already read: {shape id: {init_kwargs, input_kwargs}}.

    A GPU worker reads a job's hidden shapes with it straight from the job spec, so they
    are never written to the host's disk."""
    doc = _require_mapping(document, file, "")
    if not doc:
        raise ReleaseError(file, "", "no shapes")
    shapes = []
    for shape_id, entry in doc.items():
        entry = _require_mapping(entry, file, shape_id)
        init = entry.get("init_kwargs")
        init = {} if init is None else _require_mapping(init, file, f"{shape_id}.init_kwargs")
        inputs = _require_mapping(entry.get("input_kwargs"), file, f"{shape_id}.input_kwargs")
        shapes.append(ShapeSpec(id=str(shape_id), init_kwargs=init, input_kwargs=inputs))
    return tuple(shapes)


def _parse_metadata(path: Path, root: Path) -> OperatorMetadata:
    file = _rel(path, root)
    doc = _require_mapping(_read_json(path, root), file, "")
    tol = doc.get("tolerance") or {}
    tol = _require_mapping(tol, file, "tolerance")
    tolerance = Tolerance(
        atol=_require_nonnegative(tol.get("atol", DEFAULT_ATOL), file, "tolerance.atol"),
        rtol=_require_nonnegative(tol.get("rtol", DEFAULT_RTOL), file, "tolerance.rtol"),
    )
    score = doc.get("importance_score")
    return OperatorMetadata(
        id=_require_str(doc.get("id"), file, "id"),
        dtype=_require_str(doc.get("dtype"), file, "dtype"),
        status=doc.get("status"),
        phase=doc.get("phase"),
        importance_score=None if score is None else _require_nonnegative(score, file, "importance_score"),
        tolerance=tolerance,
        raw=doc,
    )


def _parse_roofline(path: Path, root: Path) -> dict[str, ShapeRoofline]:
    file = _rel(path, root)
    doc = _require_mapping(_read_json(path, root), file, "")
    shapes = _require_mapping(doc.get("shapes"), file, "shapes")
    parse_compute_overlap(doc, file)  # names the file in the error, unlike from_json
    result = {}
    for shape_id, entry in shapes.items():
        where = f"shapes.{shape_id}"
        entry = _require_mapping(entry, file, where)
        w = _require_mapping(entry.get("semantic_W_flops"), file, f"{where}.semantic_W_flops")
        for dtype, flops in w.items():
            if dtype not in DTYPE_TO_PEAK_PATH:
                raise ReleaseError(file, f"{where}.semantic_W_flops.{dtype}", "unknown dtype key")
            _require_nonnegative(flops, file, f"{where}.semantic_W_flops.{dtype}")
        for key in ("semantic_Q_read_bytes", "semantic_Q_write_bytes"):
            _require_nonnegative(entry.get(key), file, f"{where}.{key}")
        _require_mapping(entry.get("SOL_time_ms") or {}, file, f"{where}.SOL_time_ms")
        result[str(shape_id)] = ShapeRoofline.from_json(entry, doc)
    return result


def _load_importance(root: Path, operators: set[str], warnings: list[str]) -> dict[str, ImportanceEntry]:
    path = root / "data" / "operator_importance.json"
    if not path.exists():
        warnings.append("data/operator_importance.json: missing; weights must be set by an admin")
        return {}
    file = _rel(path, root)
    doc = _require_mapping(_read_json(path, root), file, "")
    entries = _require_mapping(doc.get("operators"), file, "operators")
    result = {}
    for name, entry in entries.items():
        entry = _require_mapping(entry, file, f"operators.{name}")
        score = _require_nonnegative(entry.get("importance_score"), file,
                                     f"operators.{name}.importance_score")
        if name not in operators:
            warnings.append(f"{file}: operators.{name}: no such operator folder; ignored")
            continue
        result[name] = ImportanceEntry(score=score, phase=entry.get("phase"),
                                       num_profiles=entry.get("num_profiles"))
    for name in sorted(operators - set(result)):
        warnings.append(f"{file}: operators.{name}: no importance score")
    return result


def _load_settings(root: Path) -> ReleaseSettings:
    path = root / "release.json"
    if not path.exists():
        return ReleaseSettings()
    file = _rel(path, root)
    doc = _require_mapping(_read_json(path, root), file, "")
    threshold = _require_nonnegative(
        doc.get("dsl_ratio_threshold", DEFAULT_DSL_RATIO_THRESHOLD), file, "dsl_ratio_threshold")
    if threshold > 1:
        raise ReleaseError(file, "dsl_ratio_threshold", "must be between 0 and 1")
    dsls = doc.get("dsls", [])
    if not isinstance(dsls, list) or not all(isinstance(d, str) for d in dsls):
        raise ReleaseError(file, "dsls", "expected a list of DSL names")
    unknown = sorted(set(dsls) - set(KNOWN_DSLS))
    if unknown:
        raise ReleaseError(file, "dsls", f"unknown DSL(s) {', '.join(unknown)} (known: "
                           f"{', '.join(KNOWN_DSLS)})")
    return ReleaseSettings(dsl=_require_str(doc.get("dsl", DEFAULT_DSL), file, "dsl"),
                           dsl_ratio_threshold=threshold, dsls=tuple(dsls))


def accepted_by_default(first: str) -> tuple[str, ...]:
    """Every DSL this evaluator supports, the release's own first (the upload default)."""
    return (first, *(d for d in SUPPORTED_DSLS if d != first))
