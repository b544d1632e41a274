"""The trusted side of an evaluation: per shape, drive the stages and judge the results.

The parent draws secret seeds, asks the sandboxed child to run the candidate on inputs
drawn from them, computes the reference itself on the same inputs and compares. It needs
only public files (a GPU host has nothing else); `apply_roofline` adds SOL and attainment
where the hidden roofline lives.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import platform
import random
import secrets
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from . import adoption as adoption_mod
from . import environment
from .compare import Comparison, as_output_dict, compare_outputs
from .confidence import median_standard_error
from .dsl import unavailable_reason
from .isolation.device_memory import configure_cuda_allocator, is_out_of_memory, release_cached_memory
from .isolation.output_area import CallTensors, LayoutRefused, check_layout
from .isolation.sandbox import (
    CandidateError,
    ChildDied,
    ChildProcess,
    ChildTimeout,
    EventHandler,
    HarnessError,
    SandboxSettings,
    WarmChildren,
    describe_exit,
)
from .operator_files import import_file, make_inputs, make_model, tensor_bytes
from .release import (
    DEFAULT_DSL,
    DEFAULT_DSL_RATIO_THRESHOLD,
    HardwareSpec,
    PublicOperator,
    ShapeRoofline,
    ShapeSpec,
    Tolerance,
)
from .results import PASSED, EvaluationResult, ShapeReport
from .roofline import attainment, roofline_point
from .steps import Steps, checked_child_steps
from .timed_calls import CallPlan, FlowError, input_sample, rehearse_gap
from .timing import GapAllowance, TimingSettings, record_gap_allowance

MAX_TIMING_SAMPLES = TimingSettings().max_samples


@dataclass(frozen=True)
class EvaluationSettings:
    trials: int = 5
    # A candidate whose source is the operator's own reference.py, byte for byte (the
    # release's PyTorch baseline), is the trusted side's code: it is checked once against
    # itself (trials), its fallback is not observed (it is PyTorch by definition, and a
    # baseline's score counts fallbacks) and one timed call is checked. Its timing is
    # measured as any candidate's is. On the public Atrex-Bench's large shapes the trials
    # and the adoption call cost 70% of a shape (benchmarks/shape_cost.py: block_scaled_mm
    # shape 23, 77 s of trials and 16 s of adoption for a 0.53 s call whose 4.9 GB output
    # crosses from child to parent for every check).
    reference_trials: int = 1
    compile_timeout_s: float = 300.0  # import, instantiate, first call (JIT) and the trials
    call_timeout_s: float = 120.0  # the adoption stage
    timing: TimingSettings = TimingSettings()
    timing_input_sets: int = 4
    timing_input_bytes: int = 2 * 1024**3  # rotate fewer sets for large inputs
    # Above this size of one input set the trusted side judges the correctness trials after
    # the child has run them all, not while it runs the next (device memory, _correctness).
    overlap_input_bytes: int = 1024**3
    device: str | None = None  # "cuda" or "cpu"; None picks the GPU when there is one
    sandbox: SandboxSettings = SandboxSettings()


@dataclass(frozen=True)
class EvaluationRequest:
    """Everything public a GPU host needs to evaluate one candidate on one operator."""

    operator: PublicOperator
    candidate_source: str
    tolerance: Tolerance = Tolerance()
    shape_ids: Sequence[str] | None = None  # None: every shape
    dsl: str = DEFAULT_DSL
    dsl_ratio_threshold: float = DEFAULT_DSL_RATIO_THRESHOLD
    masked_paths: Sequence[Path] = field(default_factory=tuple)  # hidden files on this host
    # The secret from which this evaluation's input seeds derive. None: drawn here. The
    # portal sends one per job attempt so an admin can replay an evaluation exactly.
    seed: int | None = None
    # The release's hidden tier for this operator: run after every public shape, so nothing
    # the candidate learns of them (it sees each one only in that shape's requests; never in
    # its copy of shapes.json) can change a public shape's result.
    hidden_shapes: Sequence[ShapeSpec] = ()

    def shape_spec(self, shape_id: str) -> ShapeSpec:
        for spec in self.hidden_shapes:
            if spec.id == shape_id:
                return spec
        return self.operator.shape(shape_id)


ProgressCallback = Callable[[ShapeReport, int, int], None]
GPU_MODE, INTERPRETER_MODE = "gpu", "cpu-interpreter"  # EvaluationResult.mode
FULL_CHECKS, REFERENCE_CHECKS = "full", "reference"  # EvaluationResult.checks


def failed_trials_message(failures: Sequence[Comparison], trials: Sequence[Comparison]) -> str:
    """Why a shape failed correctness, agreeing with its max-error column: the failing trial
    quoted is the one with the largest error, and where a trial that passed had a larger
    absolute error (within rtol of a large reference value) the message says so too."""
    quoted = max(failures, key=lambda c: c.max_abs_error)
    message = f"{len(failures)} of {len(trials)} trials failed; the worst: {quoted.reason}"
    overall = max(c.max_abs_error for c in trials)
    if overall > quoted.max_abs_error:
        message += f" (over all trials max abs error {overall:.4g}, within tolerance there)"
    return message


def checks_for(job: EvaluationRequest) -> str:
    """"reference" when the candidate is the operator's reference.py unchanged, else "full"."""
    try:
        reference = (job.operator.directory / "reference.py").read_text(encoding="utf-8")
    except OSError:
        return FULL_CHECKS
    return REFERENCE_CHECKS if job.candidate_source == reference else FULL_CHECKS


def evaluation_mode(device_type: str) -> str:
    """"gpu", or "cpu-interpreter": Triton's interpreter, which measures no time."""
    return GPU_MODE if device_type == "cuda" else INTERPRETER_MODE


def evaluate(job: EvaluationRequest, settings: EvaluationSettings = EvaluationSettings(),
             progress: ProgressCallback | None = None,
             warm: WarmChildren | None = None) -> EvaluationResult:
    """Evaluate one candidate on the job's shapes. `warm` supplies pre-started children."""
    shapes = [s for s in job.operator.shapes if job.shape_ids is None or s.id in job.shape_ids]
    unknown = set(job.shape_ids or ()) - {s.id for s in shapes}
    if unknown:
        raise ValueError(f"unknown shapes for {job.operator.name}: {sorted(unknown)}")
    if {s.id for s in job.hidden_shapes} & {s.id for s in job.operator.shapes}:
        raise ValueError(f"{job.operator.name}: a hidden shape has a public shape's id")
    shapes += job.hidden_shapes  # last: see EvaluationRequest.hidden_shapes
    started = time.perf_counter()
    device = torch.device(settings.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cannot = unavailable_reason(job.dsl, device.type)
    if cannot is not None:
        raise HarnessError(cannot)
    if device.type == "cuda":
        configure_cuda_allocator()
    if warm is not None:
        if (warm.device, warm.dsl, warm.masked_paths) != (device.type, job.dsl,
                                                          tuple(job.masked_paths)):
            raise ValueError("the warm children were made for another device, DSL or mask")
        child = warm.take()
    else:
        child = ChildProcess(device=device.type, dsl=job.dsl, masked_paths=job.masked_paths,
                             settings=settings.sandbox)
        child.start()  # its imports and CUDA start-up overlap ours below
    child.bind(job.operator, job.candidate_source)
    checks = checks_for(job)
    try:
        result = EvaluationResult(
            operator=job.operator.name, dsl=job.dsl,
            device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            mode=evaluation_mode(device.type),
            candidate_sha256=hashlib.sha256(job.candidate_source.encode()).hexdigest(),
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            versions=_versions(), isolation=dataclasses.asdict(child.isolation),
            checks=checks,
        )
        trusted = _TrustedSide(job, device)
        for index, shape in enumerate(shapes):
            restarts_before = child.restarts
            shape_result = _ShapeRun(job, settings, trusted, child, shape.id, device,
                                     checks).run()
            shape_result.child_restarts = child.restarts - restarts_before
            result.shapes.append(shape_result)
            if progress is not None:
                progress(shape_result, index + 1, len(shapes))
    finally:
        child.close()
    result.child_start_seconds = child.start_seconds
    result.finished_at = datetime.now(UTC).isoformat(timespec="seconds")
    result.seconds = time.perf_counter() - started
    return result


def apply_roofline(result: EvaluationResult, rooflines: Mapping[str, ShapeRoofline],
                   hardware: HardwareSpec) -> EvaluationResult:
    """SOL per shape, and attainment where a correct shape was timed (trusted side only)."""
    result.hardware = hardware.name
    for shape in result.shapes:
        roofline = rooflines.get(shape.shape_id)
        if roofline is None:
            continue
        point = roofline_point(roofline, hardware)
        entry: dict[str, Any] = {
            "hardware": hardware.name, "sol_s": point.sol_s, "regime": point.regime,
            "arithmetic_intensity": point.arithmetic_intensity,
            "attainment": None, "attainment_with_floor": None, "suspicious": False,
        }
        timing = shape.timing or {}
        if shape.status == PASSED and timing.get("measured") and timing.get("median_s"):
            score = attainment(point.sol_s, timing["median_s"], hardware.launch_floor_s)
            entry.update(attainment=score.attainment,
                         attainment_with_floor=score.attainment_with_floor,
                         suspicious=score.suspicious)
        elif shape.status == PASSED:
            entry["attainment_note"] = timing.get("reason") or "not timed"
        else:
            entry["attainment"] = 0.0
        shape.roofline = entry
    return result


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


class _ShapeRun:
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

    def run(self) -> ShapeReport:
        started = time.perf_counter()
        try:
            if self._timed("correctness", self._correctness):
                if self.checks == FULL_CHECKS:
                    self._timed("adoption", self._adoption)
                self._timed("performance", self._performance)
        except CandidateError as exc:
            self.result.fail(exc.stage if exc.stage != "harness" else self.stage, exc.message,
                             exc.traceback)
        except ChildTimeout as exc:
            self.result.fail(self.stage, f"timed out after {exc.seconds:.0f} s in the "
                                         f"{self.stage} stage; the process group was killed",
                             exc.stderr_tail)
        except ChildDied as exc:
            self.result.fail(self.stage, f"{describe_exit(exc.returncode)} during the "
                                         f"{self.stage} stage", exc.stderr_tail)
        except ReferenceOutOfMemory as exc:
            self.result.fail("reference", str(exc))
        finally:
            self._reference_model = None
            release_cached_memory(self.device)
        breaches = self.child.limit_breaches()
        if breaches and self.result.status != PASSED:
            # Why the process died, ran out of forks or stalled, where a limit says it.
            self.result.error = f"{self.result.error}; {'; '.join(breaches)}"
        self.result.seconds = time.perf_counter() - started
        self.result.steps = self.steps.as_report()
        return self.result

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

    # -- stages --------------------------------------------------------------------------

    def _correctness(self) -> bool:
        trials = self.settings.reference_trials if self.checks == REFERENCE_CHECKS \
            else self.settings.trials
        seeds = [self.seeds.draw() for _ in range(trials)]
        reference = self._reference()
        failures: list[Comparison] = []
        worst: list[Comparison] = []
        reported: list[dict[str, Any]] = []
        # Each trial is judged while the child runs the next, unless the shape is large: then
        # both sides would hold it on the one GPU at once (an H200 holds a public fp8 MoE
        # shape's 108 GiB reference once, not twice), and the trials are judged after the
        # child has run them all and handed its memory back.
        one_at_a_time = self._input_bytes() > self.settings.overlap_input_bytes

        def judge(event: dict[str, Any]) -> None:
            judging = time.perf_counter()
            comparison = self._check_trial(reference, seeds[event["index"]], event)
            self._judging_s += time.perf_counter() - judging
            self.result.trials_checked += 1
            worst.append(comparison)
            if not comparison.passed:
                failures.append(comparison)

        def on_trial(event: dict[str, Any]) -> None:
            if event.get("event") != "trial":
                return
            index = event.get("index")
            if not isinstance(index, int) or not 0 <= index < len(seeds) or index != len(reported):
                raise CandidateError("correctness", f"the result channel reported trial {index!r} "
                                                    f"out of order")
            if index == 0:
                self.result.stage_reached = "compile"
                self.stage = "correctness"
            reported.append(event)
            if not one_at_a_time:
                judge(event)

        done = self._request({"cmd": "correctness", **self.base, "trial_seeds": seeds},
                             self.settings.compile_timeout_s, on_event=on_trial)
        self.observed_kernels |= _kernel_names(done.get("kernel_names"), "correctness")
        if one_at_a_time:
            for event in reported:
                judge(event)
        if len(worst) != len(seeds):
            raise CandidateError("correctness", f"{len(worst)} of {len(seeds)} trials reported")
        finite = [c for c in worst if c.max_abs_error != float("inf")]
        self.result.max_abs_error = max((c.max_abs_error for c in worst), default=None)
        self.result.max_rel_error = max((c.max_rel_error for c in worst), default=None)
        if finite:
            self.result.worst_output = max(finite, key=lambda c: c.max_abs_error).worst_output
        if failures:
            self.result.fail("correctness", failed_trials_message(failures, worst))
            return False
        self.result.status = PASSED
        self.result.stage_reached = "correctness"
        return True

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

    def _adoption(self) -> None:
        self.stage = "adoption"
        seed = self.seeds.draw()
        done = self._request({"cmd": "adoption", **self.base, "seed": seed},
                             self.settings.call_timeout_s)
        call = done.get("call")
        if not isinstance(call, dict):
            raise CandidateError("adoption", "the result channel sent no output of the "
                                             "recorded call")
        reference = self._reference()
        check = self._check_trial(reference, seed, call)
        if not check.passed:
            raise CandidateError("adoption", "the call observed for fallback detection gave a "
                                             f"different result from the checked ones: {check.reason}")
        try:
            evidence = adoption_mod.AdoptionEvidence(
                dsl_kernel_names=frozenset(str(n) for n in done["dsl_kernel_names"]),
                foreign_dsl_launches=tuple(str(n) for n in done["foreign_dsl_launches"]),
                kernels=tuple(adoption_mod.KernelRecord(str(n), float(t)) for n, t in done["kernels"]),
                aten_ops={str(k): int(v) for k, v in dict(done["aten_ops"]).items()},
                dsl_launch_count=int(done["dsl_launch_count"]),
                compiled_frames=int(done["compiled_frames"]),
                device_timed=bool(done["device_timed"]),
                dsl=self.job.dsl,
                other_dsl_kernels={str(k): str(v) for k, v in
                                   dict(done.get("other_dsl_kernels") or {}).items()},
                other_dsl_launch_count=int(done.get("other_dsl_launch_count") or 0),
                library_kernels={str(k): str(v) for k, v in
                                 dict(done.get("library_kernels") or {}).items()},
                library_launch_count=int(done.get("library_launch_count") or 0),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CandidateError("adoption", "the result channel sent a malformed adoption "
                                             f"report ({type(exc).__name__})") from exc
        self.observed_kernels |= _kernel_names(done.get("kernel_names"), "adoption")
        report = adoption_mod.adoption_report(evidence, self.job.dsl_ratio_threshold)
        self.result.adoption = dataclasses.asdict(report)
        self.result.stage_reached = "adoption"

    def _performance(self) -> None:
        """Timed calls (GPU) or unmeasured ones run the same way (CPU); either way some of
        them are checked against the reference (timed_calls)."""
        self.stage = "performance"
        per_set = max(self._input_bytes(), 1)
        # a third of the byte budget: the sets, their pristine copies and one fresh draw
        sets = max(1, min(self.settings.timing_input_sets,
                          self.settings.timing_input_bytes // (3 * per_set)))
        timing = self.settings.timing
        if self.device.type != "cuda":
            # nothing is timed: two buffer sets, so the unmeasured calls revisit one as a
            # timing loop does, and every call checked, so the CPU run is deterministic
            sets = min(sets, 2)
            timing = dataclasses.replace(timing, check_probability=1.0,
                                         max_checks=timing.unmeasured_calls)
        if self.checks == REFERENCE_CHECKS:
            timing = dataclasses.replace(timing, max_checks=1)
        # a captured graph is trusted once a replay matched the eager call within these
        timing = dataclasses.replace(timing, capture_atol=self.job.tolerance.atol,
                                     capture_rtol=self.job.tolerance.rtol)
        graph_error = None
        poisoned_on = self.trusted.capture_poisoned_on
        if timing.allow_graph and poisoned_on is not None:
            timing = dataclasses.replace(timing, allow_graph=False)
            graph_error = (f"not tried: capturing this candidate's forward corrupted the CUDA "
                           f"context on shape {poisoned_on} of this evaluation")
        buffer_seeds = [self.seeds.draw() for _ in range(sets)]
        request = {"cmd": "timing", **self.base, "seeds": buffer_seeds,
                   "settings": dataclasses.asdict(timing)}
        if self.device.type == "cuda":
            request["gap_allowance"] = self._gap_allowance(buffer_seeds[0]).to_wire()
        timeout = timing.max_seconds + self.settings.call_timeout_s
        clocks_before = environment.clocks(self.device)
        checks = _TimedCallJudge(self, timing, buffer_seeds)
        try:
            done = self._request(request, timeout, on_event=checks.on_event)
        except CandidateError as exc:
            if not timing.allow_graph or "graph capture" not in exc.message:
                raise
            # A failed capture poisoned that process's CUDA context: a fresh child, eagerly.
            self.child.kill()
            self.trusted.capture_poisoned_on = self.spec.id
            graph_error = exc.message.splitlines()[0][:300]
            request["settings"] = dataclasses.asdict(dataclasses.replace(timing, allow_graph=False))
            checks = _TimedCallJudge(self, timing, buffer_seeds)
            done = self._request(request, timeout, on_event=checks.on_event)
        self.result.environment = {**self.trusted.environment, "clocks_before": clocks_before,
                                   "clocks_after": environment.clocks(self.device)}
        report = _checked_timing(done.get("timing"))
        if graph_error is not None:
            report["graph_error"] = graph_error
        if self.checks == FULL_CHECKS:
            # The operator's own reference is the trusted side's code, which does not detect
            # the timer; its vendor kernels may differ from call to call with data-dependent
            # sizes (cuBLAS picks a GEMM kernel by M: an expert's tokens in MoE routing).
            _check_timed_kernels(report["timed_kernel_names"], self.observed_kernels)
        checks.finish(done.get("checked_calls"), report)
        self.result.timing = report
        self.result.stage_reached = "performance"

    def _gap_allowance(self, seed: int) -> GapAllowance:
        """What the harness's own work between two timed calls launches on this device, done
        here on the trusted side's tensors (timing.GapAllowance)."""
        def draw(seed: int) -> dict[str, Any]:
            return make_inputs(self.trusted.inputs, self.spec.input_kwargs, seed, self.device)

        with _trusted_allocations(self.device), self.steps("gap_allowance"):
            allowance = record_gap_allowance(rehearse_gap(draw, seed))
        release_cached_memory(self.device)
        return allowance

    def _input_bytes(self) -> int:
        """The size of one input set, measured once on a set the trusted side draws and drops."""
        if self._input_set_bytes is None:
            with _trusted_allocations(self.device), self.steps("input_size_probe"):
                probe = make_inputs(self.trusted.inputs, self.spec.input_kwargs, 0, self.device)
            self._input_set_bytes = tensor_bytes(probe)
            del probe
            release_cached_memory(self.device)
        return self._input_set_bytes


class _TimedCallJudge:
    """The timed calls of one timing request, as the trusted side steers and judges them.

    Between two timed calls the child asks (timed_calls.TimedCallFlow); the judge answers
    whether the call that just returned is checked and the seed of the next call's
    contents, both drawn here, after that call returned: the child cannot choose, predict
    or pin either. A checked call is handed over: the child waits after saving it until the
    parent answers (child._hand_over), so no code of the candidate runs between the save and
    the judging, and it is judged against the reference for the seed this side gave. On a
    shape judged one side at a time (larger than overlap_input_bytes: both sides cannot
    hold it on the GPU at once), the call is copied to host memory then and judged after the
    request, from that copy."""

    def __init__(self, shape: _ShapeRun, timing: TimingSettings, buffer_seeds: Sequence[int]) -> None:
        self.shape = shape
        self.plan = CallPlan(shape.seeds.draw, timing.check_probability, timing.max_checks)
        self.buffer_seeds = list(buffer_seeds)
        self.one_at_a_time = shape._input_bytes() > shape.settings.overlap_input_bytes
        self.handed: list[dict[str, Any]] = []
        self.failure: str | None = None

    def on_event(self, event: dict[str, Any]) -> dict[str, Any] | None:
        kind = event.get("event")
        if kind == "ask":
            try:
                return self.plan.answer(event)
            except FlowError as exc:
                raise CandidateError("performance", str(exc)) from None
        if kind == "handover":
            self._take(event)
        return None

    def _take(self, event: dict[str, Any]) -> None:
        sample = event.get("sample")
        picked = self.plan.picked
        if not (isinstance(sample, int) and picked and sample == picked[-1]
                and len(self.handed) == len(picked) - 1):
            raise CandidateError("performance", "the result channel sent an invalid hand-over "
                                                "of a checked timed call")
        # judged against the contents this side gave (or, where draws do not fit the
        # buffers, the buffer set's own draw the child restored)
        event = {**event, "seed": self._seed_of(sample)}
        self.handed.append(event)
        self.shape.child.check_alone("the hand-over of a checked timed call")
        if self.one_at_a_time:
            self.shape.child.take_call(event.get("offset"), event.get("layout"))
        elif self.failure is None:
            self._judge(event, taken=False)

    def _seed_of(self, sample: int) -> int:
        if self.plan.fresh:
            return self.plan.given[sample]
        return self.buffer_seeds[sample % len(self.buffer_seeds)]

    def finish(self, checked: object, report: Mapping[str, Any]) -> None:
        """Every call the child says it checked was handed over (same sample and place),
        at least one; every call the timing ran got its contents from here; all of the
        checked ones right."""
        if not isinstance(checked, list) or not 1 <= len(checked) <= self.plan.max_checks \
                or [_call_key(c) for c in checked] != [_call_key(c) for c in self.handed] \
                or len(self.handed) != len(self.plan.picked):
            raise CandidateError("performance", "the result channel sent no valid report of the "
                                                "checked timed calls")
        if report.get("timed_calls") != len(self.plan.given) or not self.plan.finished():
            raise CandidateError("performance", "the timing report's calls are not the ones the "
                                                "parent gave contents for")
        if self.one_at_a_time:
            for event in self.handed:
                if self.failure is None:
                    self._judge(event, taken=True)
        if self.failure is not None:
            raise CandidateError("performance", self.failure)

    def _judge(self, event: dict[str, Any], taken: bool) -> None:
        shape = self.shape
        judging = time.perf_counter()
        comparison = shape._check_trial(shape._reference(), event["seed"], event, taken=taken)
        shape._judging_s += time.perf_counter() - judging
        if not comparison.passed:
            self.failure = f"timed call {event['sample']} gave a wrong result: {comparison.reason}"


def _call_key(call: object) -> tuple[object, object]:
    if not isinstance(call, dict):
        return (None, None)
    return (call.get("sample"), call.get("offset"))


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
    """A list of kernel names from the child, checked as untrusted input."""
    if not isinstance(names, list) or len(names) > MAX_KERNEL_NAMES or not all(
            isinstance(n, str) and len(n) <= MAX_KERNEL_NAME_CHARS for n in names):
        raise CandidateError(stage, "the result channel sent a malformed list of kernel names")
    return set(names)


def _check_timed_kernels(timed: object, observed: set[str]) -> None:
    """Every timed call runs only kernels the observed calls ran (how often may vary with
    the data, as MoE routing does): a candidate that detects the timer cannot switch paths."""
    new = sorted(_kernel_names(timed, "performance") - observed)
    if new:
        shown = ", ".join(new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
        raise CandidateError("performance", f"behaviour changed under timing: {len(new)} "
                                            f"kernel(s) ran only in timed calls, never in the "
                                            f"calls observed (correctness trials, adoption): "
                                            f"{shown}; the shape is not scored")


def _checked_timing(timing: object) -> dict[str, Any]:
    """The child's timing report is untrusted: numbers must be numbers before they are used."""
    numeric = ("median_s", "p10_s", "p90_s", "mean_s", "rse", "wall_median_s",
               "busy_median_s", "span_median_s", "kernels_per_forward", "seconds_spent")
    if not isinstance(timing, dict) or not isinstance(timing.get("measured"), bool) or any(
            not isinstance(timing.get(k), int | float | None) or isinstance(timing.get(k), bool)
            for k in numeric) or not isinstance(timing.get("timed_kernel_names"), list):
        raise CandidateError("performance", "the result channel sent a malformed timing report")
    if not isinstance(timing.get("timed_calls"), int) or isinstance(timing.get("timed_calls"), bool):
        raise CandidateError("performance", "the timing report does not say how many calls ran")
    if timing["measured"] and not (isinstance(timing.get("median_s"), int | float)
                                   and timing["median_s"] > 0):
        raise CandidateError("performance", "the timing report has no positive median")
    if timing["measured"]:
        samples = timing.get("samples_s")
        if not (isinstance(samples, list) and 0 < len(samples) <= MAX_TIMING_SAMPLES
                and len(samples) == timing.get("n") and all(
                    isinstance(s, int | float) and not isinstance(s, bool) and s > 0
                    for s in samples)):
            raise CandidateError("performance", "the timing report's samples are malformed")
        if not math.isclose(statistics.median(samples), timing["median_s"], rel_tol=1e-9):
            raise CandidateError("performance", "the timing report's median is not the median "
                                                "of its samples")
        # the trusted side's own figure: how far the median could move (confidence.py)
        timing["median_se_s"] = median_standard_error(samples)
    return timing


def _synchronize(device: torch.device) -> None:
    """Ends the device work a step queued, so the step's seconds hold it (GPU only)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    return versions
