"""One shape's evaluation as its stages share it: the trusted side (reference and inputs,
imported in the parent only), the shape's seeds, its requests to the child, and the judging
of one call the child made against the reference on the same inputs.

The stages (`correctness.py`, `adoption.py`, `performance.py`) each add theirs to
`ShapeRunState`; `evaluate._ShapeRun` runs them in order.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from .. import environment
from ..compare import Comparison, as_output_dict, compare_outputs
from ..isolation.channel import EventHandler
from ..isolation.child_process import ChildProcess
from ..isolation.device_memory import is_out_of_memory, release_cached_memory
from ..isolation.output_area import CallTensors, LayoutRefused, check_layout
from ..isolation.sandbox import CandidateError, HarnessError
from ..operator_files import import_file, make_inputs, make_model, tensor_bytes
from ..request import FULL_CHECKS, EvaluationRequest, EvaluationSettings
from ..results import ShapeReport
from ..steps import Steps, checked_child_steps
from ..timed_calls import input_sample


class ReferenceOutOfMemory(Exception):
    """The trusted side could not hold this shape's inputs or reference on this device: the
    shape cannot be evaluated here, whatever the candidate does."""


class _TrustedSide:
    """The reference and the input generator, imported in the parent only."""

    def __init__(self, job: EvaluationRequest, device: torch.device) -> None:
        tag = hashlib.sha1(str(job.operator.directory).encode()).hexdigest()[:10]
        self.inputs = import_file(job.operator.directory / "input.py", f"atrex_input_{tag}")
        reference = import_file(job.operator.directory / "reference.py", f"atrex_reference_{tag}")
        self.reference_class: type[torch.nn.Module] = reference.Model
        self.device = device
        # The shape on which capturing the candidate's forward corrupted its child's CUDA
        # context, if one did: its later shapes are timed eagerly without trying again, as
        # each try costs a new child (9-10 s a shape on an H200 for the public fused_moe
        # and fp8_blockscale_fused_moe references, whose capture fails on a host sync).
        self.capture_poisoned_on: str | None = None
        self.environment = environment.describe(device, job.dsl)


class ShapeRunState:
    """A shape being evaluated: its request, child, seeds, reference and result."""

    def __init__(self, job: EvaluationRequest, settings: EvaluationSettings, trusted: _TrustedSide,
                 child: ChildProcess, shape_id: str, device: torch.device,
                 checks: str = FULL_CHECKS) -> None:
        self.job, self.settings, self.trusted, self.child = job, settings, trusted, child
        self.checks = checks
        self.spec = job.shape_spec(shape_id)
        self.device = device
        self.result = ShapeReport(shape_id=shape_id, environment=dict(trusted.environment))
        self.stage = "compile"
        self.seeds = _SeedSource(job.seed, shape_id)
        self.init_seed = self.seeds.draw()
        self._reference_model: torch.nn.Module | None = None
        self._input_set_bytes: int | None = None
        # Every kernel (memcpy, memset) the observed calls ran, by name: the correctness
        # trials' and the adoption call's. A timed call may run no other.
        self.observed_kernels: set[str] = set()
        self.base = {"shape_id": shape_id, "init_kwargs": dict(self.spec.init_kwargs),
                     "input_kwargs": dict(self.spec.input_kwargs), "init_seed": self.init_seed}
        # Where this shape's seconds go (harness/steps.py): the trusted side's steps, each
        # round trip to the child, and the child's own account of each request.
        self.steps = Steps()
        self._judging_s = 0.0  # judging trials while the child runs the next (in a request)

    def _request(self, command: dict[str, Any], timeout: float,
                 on_event: EventHandler | None = None) -> dict[str, Any]:
        """One request to the child, its round trip timed apart from the judging the
        trusted side did meanwhile, and the child's own account of it merged in."""
        name = str(command["cmd"])
        with self.steps("child_start_wait"):  # a child started ahead is ready: ~0 s
            self.child.ensure_started()
        judged_before = self._judging_s
        started = time.perf_counter()
        try:
            done = self.child.request(command, timeout, on_event=on_event) if on_event \
                else self.child.request(command, timeout)
        finally:
            self.steps.add(f"child.{name}", time.perf_counter() - started
                           - (self._judging_s - judged_before))
        seconds, counts = checked_child_steps(done.get("steps"))
        self.steps.merge(f"in_child.{name}.", seconds, counts)
        return done

    def _reference(self) -> torch.nn.Module:
        """The trusted reference for this shape, built once (same seed as the candidate's)."""
        if self._reference_model is None:
            with _trusted_allocations(self.device), self.steps("reference_build"):
                self._reference_model = make_model(self.trusted.reference_class,
                                                   self.spec.init_kwargs, self.init_seed,
                                                   self.device)
        return self._reference_model

    def _timed(self, stage: str, run: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        try:
            return run()
        finally:
            release_cached_memory(self.device)  # the child's next stage may need it
            self.result.stage_seconds[stage] = time.perf_counter() - started

    def _check_trial(self, reference: torch.nn.Module, seed: int, event: dict[str, Any],
                     taken: bool = False) -> Comparison:
        with _trusted_allocations(self.device):
            with self.steps("inputs"):
                inputs = make_inputs(self.trusted.inputs, self.spec.input_kwargs, seed,
                                     self.device)
                originals = {k: v.clone() for k, v in inputs.items()
                             if isinstance(v, torch.Tensor)}
                _synchronize(self.device)
            with torch.no_grad(), self.steps("reference"):
                expected = as_output_dict(reference(**inputs))
                _synchronize(self.device)
        if expected is None:
            raise HarnessError("the reference returned neither a tensor nor a dict of tensors: "
                               "the release is broken")
        # The child's outputs are read only after their layout matched what the reference and
        # the inputs say they must be: at most their size is ever read (output_area.py).
        with self.steps("output_read"):
            payload = self._load_trial(event, expected, originals, taken)
        if isinstance(payload, str):
            return Comparison(False, float("inf"), float("inf"), None, payload)
        if event.get("input_sample") != input_sample(originals):
            return Comparison(False, float("inf"), float("inf"), None,
                              "the call was not given the contents of the seed the parent drew "
                              "(its input draw was pinned or replaced in the child)")
        tol = self.job.tolerance
        # comparing holds the outputs of both sides and the inputs twice: the trusted side's
        # memory too (compare_outputs works a chunk at a time to keep it small)
        with _trusted_allocations(self.device), self.steps("compare"):
            comparison = compare_outputs(payload.outputs, expected, tol.atol, tol.rtol)
            if not comparison.passed:
                return comparison
            problem = self._input_and_alias_problem(payload, inputs, originals, expected, event)
        if problem:
            return Comparison(False, comparison.max_abs_error, comparison.max_rel_error,
                              comparison.worst_output, problem)
        return comparison

    def _load_trial(self, event: Mapping[str, Any], expected: Mapping[str, torch.Tensor],
                    inputs: Mapping[str, torch.Tensor], taken: bool = False) -> CallTensors | str:
        """The call's outputs from the child's output area (or the copy taken at its
        hand-over), checked as untrusted input; a string says what is wrong."""
        try:
            layout = check_layout(event.get("layout"), expected, inputs)
            if taken:
                return self.child.read_taken(event.get("offset"), layout, self.device)
            return self.child.read_call(event.get("offset"), layout, self.device)
        except LayoutRefused as exc:
            return str(exc)

    def _input_and_alias_problem(self, payload: CallTensors, inputs: Mapping[str, Any],
                                 originals: Mapping[str, torch.Tensor],
                                 expected: Mapping[str, torch.Tensor],
                                 event: Mapping[str, Any]) -> str | None:
        modified_by_candidate: Mapping[str, torch.Tensor] = payload.modified_inputs
        for name, original in originals.items():
            reference_changed = not torch.equal(original, inputs[name])
            if name in modified_by_candidate and not reference_changed:
                return f"the candidate modified its input '{name}'"
            if reference_changed:
                after = modified_by_candidate.get(name, original)
                tol = self.job.tolerance
                check = compare_outputs({name: after}, {name: inputs[name]}, tol.atol, tol.rtol)
                if not check.passed:
                    return f"input '{name}' is not updated in place as the reference does: " \
                           f"{check.reason}"
        aliases = event.get("aliases") or {}
        if not isinstance(aliases, dict):
            return "the result channel sent a malformed alias report"
        for output, input_name in aliases.items():
            ref_input = inputs.get(input_name)
            if not (isinstance(ref_input, torch.Tensor) and output in expected
                    and _shares_storage(expected[output], ref_input)):
                return f"output '{output}' is (a view of) input '{input_name}'"
        return None

    def _input_bytes(self) -> int:
        """The size of one input set, measured once on a set the trusted side draws and drops."""
        if self._input_set_bytes is None:
            with _trusted_allocations(self.device), self.steps("input_size_probe"):
                probe = make_inputs(self.trusted.inputs, self.spec.input_kwargs, 0, self.device)
            self._input_set_bytes = tensor_bytes(probe)
            del probe
            release_cached_memory(self.device)
        return self._input_set_bytes


class _SeedSource:
    """Input seeds for one shape: fresh secrets, or derived from the job's secret seed."""

    def __init__(self, secret: int | None, shape_id: str) -> None:
        self._rng = None if secret is None else random.Random(f"{secret}:{shape_id}")

    def draw(self) -> int:
        return secrets.randbits(63) if self._rng is None else self._rng.getrandbits(63)


@contextlib.contextmanager
def _trusted_allocations(device: torch.device) -> Iterator[None]:
    """Where the trusted side draws inputs or runs the reference: an allocation failure
    there is the shape's (it cannot run on this device), not the candidate's."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - only an allocation failure is translated
        if not is_out_of_memory(exc):
            raise
        total = torch.cuda.get_device_properties(device).total_memory \
            if device.type == "cuda" else 0
        where = f"this device's {total / 1024**3:.0f} GiB" if total else "this machine's memory"
        raise ReferenceOutOfMemory(
            f"the reference itself ran out of memory on this shape ({where}, shared with the "
            "candidate's process): the shape cannot be evaluated here, whatever the candidate "
            "does; a device check of the release lists such shapes") from None


MAX_KERNEL_NAMES, MAX_KERNEL_NAME_CHARS = 2000, 2000


def _kernel_names(names: object, stage: str) -> set[str]:
    """A list of kernel names from the child, checked as untrusted input.

    A longer name is cut to MAX_KERNEL_NAME_CHARS, not refused: PyTorch's own top-k and sort
    kernels are CUB templates whose demangled names run past 2,000 characters (the public
    topk_filter's reference failed its shapes on the H200 so, 2026-12-06), and what tells a
    kernel's origin (its namespace, its function) comes first. The message as a whole is
    bounded by the channel."""
    if not isinstance(names, list) or len(names) > MAX_KERNEL_NAMES or not all(
            isinstance(n, str) for n in names):
        raise CandidateError(stage, "the result channel sent a malformed list of kernel names")
    return {n[:MAX_KERNEL_NAME_CHARS] for n in names}


def _synchronize(device: torch.device) -> None:
    """Ends the device work a step queued, so the step's seconds hold it (GPU only)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())
