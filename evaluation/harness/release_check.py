"""Checking a release before teams see it: what the loader checks, and what needs running.

The loader (release.py) already refuses a release whose files are missing or malformed,
whose shapes.json kwargs do not fit `_make_inputs` / `Model.__init__`, or whose roofline
does not cover its shapes. Here, on top:

- the keys `_make_inputs` returns equal the parameters of `Model.forward`, for every shape
  (inputs are built on PyTorch's meta device, so a 32k-token shape costs nothing, also where
  input.py names a device, as the public Atrex-Bench's `device='cuda'` does);
- SOL is computable on every hardware profile given;
- the references of the dev tier (shape ids starting with "dev-") run on this machine and
  return what metadata.json says (output names and dtypes), without NaN;
- on a GPU host (`check_on_device`, `python -m evaluation check-release --device cuda`):
  every shape's reference runs there at all, and how much memory it takes. The web tier has
  no GPU: the portal's check_release reads that report (`--device-report`).

Release files are written by the benchmark's maintainers, so they run in-process here.
"""

from __future__ import annotations

import importlib.util
import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .compare import as_output_dict
from .release import (
    HIDDEN_SHAPES_FILE,
    HardwareSpec,
    Operator,
    ReleaseError,
    ShapeSpec,
    load_release,
)
from .roofline import roofline_point

DEV_PREFIX = "dev-"
# metadata.json dtype names; fp8 names cover both encodings (AMD parts use the fnuz ones).
DTYPES: dict[str, frozenset[torch.dtype]] = {
    "bf16": frozenset({torch.bfloat16}), "fp16": frozenset({torch.float16}),
    "fp32": frozenset({torch.float32}), "fp64": frozenset({torch.float64}),
    "fp8_e4m3": frozenset({torch.float8_e4m3fn, torch.float8_e4m3fnuz}),
    "fp8_e5m2": frozenset({torch.float8_e5m2, torch.float8_e5m2fnuz}),
    "int8": frozenset({torch.int8}), "int32": frozenset({torch.int32}),
    "int64": frozenset({torch.int64}), "bool": frozenset({torch.bool}),
    "uint8": frozenset({torch.uint8})}


@dataclass
class OperatorCheck:
    name: str
    shapes: int = 0
    dev_shapes_run: int = 0
    seconds: float = 0.0
    sol_range_us: tuple[float, float] | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class ReleaseCheck:
    release_error: str | None
    operators: list[OperatorCheck]
    warnings: list[str]

    @property
    def ok(self) -> bool:
        return self.release_error is None and not any(op.problems for op in self.operators)


def check_release(root: Path, hardware: Mapping[str, HardwareSpec],
                  progress: Callable[[OperatorCheck], None] | None = None) -> ReleaseCheck:
    try:
        release = load_release(root)
    except ReleaseError as exc:
        return ReleaseCheck(str(exc), [], [])
    profiles = {**release.hardware, **hardware}
    checks = []
    for op in release.operators.values():
        check = _check_operator(op, profiles)
        checks.append(check)
        if progress is not None:
            progress(check)
    return ReleaseCheck(None, checks, list(release.warnings))


def _check_operator(op: Operator, hardware: Mapping[str, HardwareSpec]) -> OperatorCheck:
    check = OperatorCheck(name=op.name, shapes=len(op.public.shapes))
    started = time.perf_counter()
    where = f"data/{op.name}"
    try:
        reference = _load_module(op.public.directory / "reference.py", f"{op.name}_reference")
        inputs_module = _load_module(op.public.directory / "input.py", f"{op.name}_input")
    except Exception as exc:  # noqa: BLE001 (an import error in a release file is the finding)
        check.problems.append(f"{where}: importing failed: {type(exc).__name__}: {exc}")
        return check
    parameters = inspect.signature(reference.Model.forward).parameters
    forward = [p for p in parameters if p != "self"]
    required = {p for p in forward if parameters[p].default is inspect.Parameter.empty
                and parameters[p].kind not in (inspect.Parameter.VAR_KEYWORD,
                                               inspect.Parameter.VAR_POSITIONAL)}
    if op.roofline is None:
        check.problems.append(f"{where}/roofline.json: missing (no SOL without W and Q)")
    else:
        _check_sol(op, hardware, check)
    expected = _expected_outputs(op, check)
    meta_failures = 0
    tiers = [(s, "shapes.json") for s in op.public.shapes] + \
        [(s, HIDDEN_SHAPES_FILE) for s in op.hidden_shapes]
    for shape, file in tiers:
        label = f"{where}/{file}: {shape.id}"
        try:
            with torch.device("meta"), OnMetaDevice():
                keys = set(inputs_module._make_inputs(**shape.input_kwargs))
        except Exception:  # noqa: BLE001 (data-dependent inputs cannot be built on meta)
            meta_failures += 1
            keys = None
        if keys is not None and not _keys_fit(keys, forward, required):
            check.problems.append(f"{label}: _make_inputs returns {sorted(keys)}, "
                                  f"Model.forward takes {forward}")
        if shape.id.startswith(DEV_PREFIX):
            _run_dev_shape(reference, inputs_module, shape.init_kwargs, shape.input_kwargs,
                           (forward, required), expected, label, check)
    if meta_failures:
        check.notes.append(f"{meta_failures} shapes could not be built on the meta device; "
                           "their input keys were checked on the dev tier only")
    if not any(s.id.startswith(DEV_PREFIX) for s in op.public.shapes):
        check.notes.append("no dev-tier shape: references not run")
    check.seconds = time.perf_counter() - started
    return check


class OnMetaDevice(TorchFunctionMode):
    """Keeps tensors on the meta device where input.py names one (`device='cuda'`,
    `.cuda()`, `.to("cuda")`): shapes and dtypes still come out, no memory is touched."""

    def __torch_function__(self, func: Callable[..., Any], types: Any,
                           args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = "meta"
        if func in (torch.Tensor.cuda, torch.Tensor.cpu):
            return args[0]
        if func is torch.Tensor.to:
            kwargs.pop("device", None)
            rest = [a for a in args[1:] if not isinstance(a, str | torch.device | int)]
            if not rest and not kwargs:
                return args[0]
            args = (args[0], *rest)
        return func(*args, **kwargs)


def _check_sol(op: Operator, hardware: Mapping[str, HardwareSpec],
               check: OperatorCheck) -> None:
    sols = []
    for shape_id, shape in (op.roofline or {}).items():
        for profile in hardware.values():
            try:
                sols.append(roofline_point(shape, profile).sol_s)
            except ReleaseError as exc:
                check.problems.append(f"data/{op.name}/roofline.json: shapes.{shape_id}: {exc}")
                return
    positive = [s for s in sols if s > 0]
    if len(positive) != len(sols):
        check.problems.append(f"data/{op.name}/roofline.json: a shape has W = Q = 0 (SOL 0)")
    if positive:
        check.sol_range_us = (min(positive) * 1e6, max(positive) * 1e6)


def _keys_fit(keys: set[str], forward: list[str], required: set[str]) -> bool:
    """Every input is a parameter of forward, and every parameter without a default is given."""
    return keys <= set(forward) and required <= keys


def _expected_outputs(op: Operator,
                      check: OperatorCheck) -> dict[str, frozenset[torch.dtype]] | None:
    """metadata.json output_dtypes (optional; "bf16/fp16" lists alternatives)."""
    declared = (op.metadata.raw.get("output_dtypes") if op.metadata else None) or None
    if not isinstance(declared, dict):
        return None
    expected = {}
    for name, names in declared.items():
        allowed = [DTYPES.get(part) for part in str(names).split("/")]
        if any(a is None for a in allowed):
            check.notes.append(f"output_dtypes.{name}: {names!r} names no dtype this check "
                               "knows; output dtypes not checked")
            return None
        expected[name] = frozenset().union(*allowed)  # type: ignore[arg-type]
    return expected


def _run_dev_shape(reference: ModuleType, inputs_module: ModuleType, init: Mapping[str, Any],
                   input_kwargs: Mapping[str, Any], signature: tuple[list[str], set[str]],
                   expected: dict[str, frozenset[torch.dtype]] | None, label: str,
                   check: OperatorCheck) -> None:
    forward, required = signature
    try:
        inputs = inputs_module._make_inputs(**input_kwargs)
        if not _keys_fit(set(inputs), forward, required):
            check.problems.append(f"{label}: _make_inputs returns {sorted(inputs)}, "
                                  f"Model.forward takes {forward}")
            return
        with torch.no_grad():
            raw = reference.Model(**init)(**inputs)
    except Exception as exc:  # noqa: BLE001 (any failure of the reference is reported)
        check.problems.append(f"{label}: the reference failed: {type(exc).__name__}: {exc}")
        return
    outputs = as_output_dict(raw)
    if outputs is None:
        check.problems.append(f"{label}: the reference returned {type(raw).__name__}, "
                              "not a tensor or a dict of tensors")
        return
    check.dev_shapes_run += 1
    if expected is not None:
        positional = all(k == f"out{i}" for i, k in enumerate(outputs))
        if (len(expected) == 1 or positional) and len(expected) == len(outputs):
            # One output, or a tuple: metadata's names are taken in order.
            expected = dict(zip(outputs, expected.values(), strict=True))
        if set(expected) != set(outputs):
            check.problems.append(f"{label}: outputs {sorted(outputs)}, metadata.json "
                                  f"output_dtypes names {sorted(expected)}")
            return
        for name, tensor in outputs.items():
            if tensor.dtype not in expected[name]:
                wanted = " or ".join(sorted(str(d) for d in expected[name]))
                check.problems.append(f"{label}: output {name} is {tensor.dtype}, "
                                      f"metadata.json says {wanted}")
    for name, tensor in outputs.items():
        if tensor.is_floating_point() and bool(torch.isnan(tensor.float()).any()):
            check.problems.append(f"{label}: output {name} has NaN")


def _load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"atrex_release_check.{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- on a GPU: can each shape's reference run there at all? ----------------------------

DEVICE_REPORT_FORMAT = "atrex.device-check/1"
# An evaluation holds a shape twice over on one device: the trusted parent (inputs, their
# pristine copies, the reference's intermediates) and the sandboxed child (the same for
# the candidate); they overlap while the parent checks one trial and the child runs the next.
EVALUATION_SIDES = 2


@dataclass
class ShapeOnDevice:
    operator: str
    shape_id: str
    input_bytes: int | None = None
    peak_bytes: int | None = None  # inputs drawn and one reference call, from a clean start
    seconds: float | None = None  # that one reference call (after its inputs were drawn)
    error: str | None = None  # the reference could not run: out of memory, or what it raised

    @property
    def runs(self) -> bool:
        return self.error is None

    def evaluation_bytes(self) -> int | None:
        """What an evaluation needs on the device: both sides, each with its inputs' copies."""
        if self.peak_bytes is None or self.input_bytes is None:
            return None
        return EVALUATION_SIDES * (self.peak_bytes + self.input_bytes)


@dataclass
class DeviceCheck:
    device: str
    total_bytes: int
    shapes: list[ShapeOnDevice]

    def cannot_run(self) -> list[ShapeOnDevice]:
        return [s for s in self.shapes if not s.runs]

    def too_large_to_evaluate(self) -> list[ShapeOnDevice]:
        """Shapes whose reference runs alone but not twice over (parent and child)."""
        return [s for s in self.shapes if s.runs and (s.evaluation_bytes() or 0) > self.total_bytes]

    def to_dict(self) -> dict[str, Any]:
        return {"format": DEVICE_REPORT_FORMAT, "device": self.device,
                "total_bytes": self.total_bytes,
                "shapes": [dict(vars(s)) for s in self.shapes]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceCheck:
        if data.get("format") != DEVICE_REPORT_FORMAT:
            raise ValueError(f"not a device report ({DEVICE_REPORT_FORMAT}): format is "
                             f"{data.get('format')!r}")
        try:
            return cls(str(data["device"]), int(data["total_bytes"]),
                       [ShapeOnDevice(**s) for s in data["shapes"]])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed device report: {type(exc).__name__}: {exc}") from exc


def check_on_device(root: Path, device: torch.device, operators: Sequence[str] | None = None,
                    progress: Callable[[ShapeOnDevice], None] | None = None) -> DeviceCheck:
    """Run every shape's reference once on `device` (a GPU host's), from a clean start each
    time: its inputs' size, the peak memory of drawing them and one reference call, and
    whether it runs at all. A shape whose reference runs out of memory here cannot be
    evaluated here, whatever the candidate does."""
    from .isolation.device_memory import configure_cuda_allocator, is_out_of_memory, release_cached_memory
    from .operator_files import import_file

    release = load_release(root)
    names = list(operators) if operators is not None else list(release.operators)
    configure_cuda_allocator()
    result = DeviceCheck(torch.cuda.get_device_name(device),
                         torch.cuda.get_device_properties(device).total_memory, [])
    for name in names:
        public = release.operator(name).public
        inputs_module = import_file(public.directory / "input.py", f"atrex_device_check_in_{name}")
        reference = import_file(public.directory / "reference.py", f"atrex_device_check_ref_{name}")
        for shape in public.shapes:
            row = ShapeOnDevice(name, shape.id)
            release_cached_memory(device)
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
            try:
                _reference_once(inputs_module, reference.Model, shape, device, row)
            except Exception as exc:  # noqa: BLE001 (any failure of the reference is the finding)
                row.error = ("out of memory" if is_out_of_memory(exc)
                             else f"{type(exc).__name__}: {exc}")[:500]
            row.peak_bytes = torch.cuda.max_memory_allocated(device) - base
            result.shapes.append(row)
            if progress is not None:
                progress(row)
    release_cached_memory(device)
    return result


def _reference_once(inputs_module: ModuleType, model_class: type[torch.nn.Module],
                    shape: ShapeSpec, device: torch.device, row: ShapeOnDevice) -> None:
    """Draw the shape's inputs and call the reference once; its tensors die on return."""
    from .operator_files import make_inputs, make_model, tensor_bytes

    inputs = make_inputs(inputs_module, shape.input_kwargs, 0, device)
    row.input_bytes = tensor_bytes(inputs)
    model = make_model(model_class, shape.init_kwargs, 0, device)
    torch.cuda.synchronize(device)
    started = time.perf_counter()
    with torch.no_grad():
        model(**inputs)
    torch.cuda.synchronize(device)
    row.seconds = time.perf_counter() - started


def device_findings(report: DeviceCheck) -> tuple[list[str], list[str]]:
    """(problems, warnings) in the release check's words: a shape whose reference cannot
    run on the device is a problem; one that runs alone but not twice over, a warning."""
    gib = 1024**3
    where = f"on {report.device} ({report.total_bytes / gib:.0f} GiB)"
    problems = [f"data/{s.operator}/shapes.json: {s.shape_id}: the reference cannot run {where}: "
                f"{s.error} (peak {(s.peak_bytes or 0) / gib:.1f} GiB when it stopped)"
                for s in report.cannot_run()]
    warnings = [f"data/{s.operator}/shapes.json: {s.shape_id}: the reference's peak is "
                f"{(s.peak_bytes or 0) / gib:.1f} GiB with {(s.input_bytes or 0) / gib:.1f} GiB "
                f"of inputs; an evaluation holds about {(s.evaluation_bytes() or 0) / gib:.0f} GiB "
                f"{where}: it may run out of memory"
                for s in report.too_large_to_evaluate()]
    return problems, warnings
