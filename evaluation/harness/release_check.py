"""Checking a release before teams see it: what the loader checks, and what needs running.

The loader (release.py) already refuses a release whose files are missing or malformed,
whose shapes.json kwargs do not fit `_make_inputs` / `Model.__init__`, or whose roofline
does not cover its shapes. Here, on top:

- the keys `_make_inputs` returns equal the parameters of `Model.forward`, for every shape
  (inputs are built on PyTorch's meta device, so a 32k-token shape costs nothing, also where
  input.py names a device, as the public Atrex-Bench's `device='cuda'` does);
- SOL is computable on every hardware profile given;
- the references of the dev tier (shape ids starting with "dev-") run on this machine and
  return what metadata.json says (output names and dtypes), without NaN.

Release files are written by the benchmark's maintainers, so they run in-process here.
"""

from __future__ import annotations

import importlib.util
import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .compare import as_output_dict
from .release import HardwareProfile, Operator, ReleaseError, load_release
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


def check_release(root: Path, hardware: Mapping[str, HardwareProfile],
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


def _check_operator(op: Operator, hardware: Mapping[str, HardwareProfile]) -> OperatorCheck:
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
    for shape in op.public.shapes:
        label = f"{where}/shapes.json: {shape.id}"
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


def _check_sol(op: Operator, hardware: Mapping[str, HardwareProfile],
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
