"""How a GPU worker runs one job spec (evaluation/protocol.py says what a spec holds: a
`JobSpec`, read here once its version is checked; an `NcuSpec` for an ncu profile).

The worker needs the broker and nothing else: no database, no hidden files. It reports
through `publish`: progress after every shape, then the raw result, or a failure (the
Celery task adds a heartbeat every `heartbeat_s` seconds).

A job with hidden shapes ends no earlier than its hidden tier's release time
(protocol.release_delay, from the moment its last public shape was reported): the worker
reports at once (the portal holds what a team sees until then) and then waits, so that its
next job, which a team may be watching, does not start when the hidden shapes really ended.

A worker runs jobs back to back, so it keeps sandboxed children for its next jobs started
ahead (`warm_children`: a pool per device and DSL, ATREX_WARM_CHILDREN of them, for each DSL
of ATREX_WARM_DSLS): a fresh process per candidate, whose imports, CUDA context and private
root are paid while earlier jobs run, not on the next job's clock. On an H200 a child's
start took 7-11 s, against 5-14 s for a whole operator's evaluation after it: with one child
ahead, back-to-back jobs shorter than a start waited for the rest of it. Every child serves
one job and is closed when it ends; none is reused, so nothing crosses from one team's job
to another's.

Imports no Django: it runs on a bare GPU host.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evaluation.harness.dsl import KNOWN_DSLS, unavailable_reason
from evaluation.harness.evaluate import (
    EvaluationRequest,
    EvaluationSettings,
    evaluate,
    evaluation_mode,
)
from evaluation.harness.isolation.child_process import WarmChildren
from evaluation.harness.isolation.sandbox import HarnessError, SandboxSettings
from evaluation.harness.release import (
    PublicOperator,
    ReleaseError,
    ShapeSpec,
    Tolerance,
    load_public_operator,
    parse_shapes_document,
)
from evaluation.harness.results import EVALUATOR_VERSION, ShapeReport, json_safe
from evaluation.protocol import (
    SPEC_VERSION,
    EventKind,
    Failed,
    JobSpec,
    NcuSpec,
    OperatorFiles,
    Progress,
    Report,
    Result,
    Started,
    hidden_budget,
    release_delay,
)

Publish = Callable[[EventKind, dict[str, Any]], None]  # (event kind, payload)
CheckStop = Callable[[], None]  # raises to abandon the run
log = logging.getLogger(__name__)


_warm: dict[tuple[str, str], WarmChildren] = {}
# Per DSL (WarmChildren's docstring says why two); one on a CPU, whose few cores an
# interpreter run keeps busy for minutes, longer than any child's start.
DEFAULT_WARM_CHILDREN = {"cuda": 2, "cpu": 1}


def warm_pool_size(device: str) -> int:
    """ATREX_WARM_CHILDREN: children kept started per DSL (default 2 on a GPU, 1 on a CPU)."""
    default = DEFAULT_WARM_CHILDREN.get(device.split(":")[0], 1)
    raw = os.environ.get("ATREX_WARM_CHILDREN", str(default))
    if not raw.isdigit() or not 1 <= int(raw) <= 16:
        raise ValueError(f"ATREX_WARM_CHILDREN={raw!r}: expected a whole number from 1 to 16")
    return int(raw)


def warm_dsls(device: str) -> list[str]:
    """ATREX_WARM_DSLS (comma-separated), else every DSL this device can evaluate: the
    DSLs whose pools a worker starts when it starts. A job of another DSL finds its pool
    made on its first job."""
    raw = os.environ.get("ATREX_WARM_DSLS", "")
    if raw.strip():
        chosen = [d.strip() for d in raw.split(",") if d.strip()]
        unknown = [d for d in chosen if d not in KNOWN_DSLS]
        if unknown:
            raise ValueError(f"ATREX_WARM_DSLS: unknown DSL(s) {', '.join(unknown)} (known: "
                             f"{', '.join(KNOWN_DSLS)})")
        return chosen
    return [d for d in KNOWN_DSLS if unavailable_reason(d, device.split(":")[0]) is None]


def warm_children(device: str, dsl: str, settings: SandboxSettings) -> WarmChildren:
    """This process's pool of children kept ahead for jobs of one device and DSL."""
    key = (device, dsl)
    if key not in _warm:
        _warm[key] = WarmChildren(device=device, dsl=dsl, masked_paths=(), settings=settings,
                                  size=warm_pool_size(device))
    return _warm[key]


def prepare_warm_children(device: str, settings: SandboxSettings) -> list[str]:
    """Start the pools of every DSL a worker serves (at its start); the DSLs started."""
    dsls = warm_dsls(device)
    for dsl in dsls:
        warm_children(device, dsl, settings).prepare()
    return dsls


def worker_device() -> str:
    """The device this worker evaluates on, as `evaluate` picks it."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def worker_capability() -> dict[str, Any]:
    """What this worker can evaluate, as its Announcement says: the mode (timed on a GPU, or
    checked in Triton's CPU interpreter), the device and the DSLs it runs there."""
    import torch

    device = worker_device()
    return {"mode": evaluation_mode(device),
            "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
            "dsls": tuple(d for d in KNOWN_DSLS if unavailable_reason(d, device) is None),
            "evaluator_version": EVALUATOR_VERSION}


def close_warm_children() -> None:
    for warm in _warm.values():
        warm.close()
    _warm.clear()


def new_run_id() -> str:
    """One execution of a spec: a redelivered message runs the same attempt again."""
    return uuid.uuid4().hex


def _hidden_shapes(spec: JobSpec) -> tuple[ShapeSpec, ...]:
    """The job's hidden shapes, parsed from the spec in memory (never written to disk)."""
    text = spec.operator.hidden_shapes_json or ""
    if not text:
        return ()
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReleaseError("job spec", "hidden_shapes_json", f"invalid JSON: {exc.msg}") from None
    return parse_shapes_document(document, "job spec hidden_shapes_json")


class HiddenTierClock:
    """When the job's hidden tier began (worker's clock), and how long the worker holds the
    job after it ended: until protocol.release_delay past the start."""

    def __init__(self, budget_s: float, quantum_s: float,
                 clock: Callable[[], float] | None = None, hidden_count: int = 0,
                 per_public: float = 0.0) -> None:
        self.budget_s, self.quantum_s = budget_s, quantum_s
        self.clock: Callable[[], float] = clock or (lambda: time.monotonic())
        self.started: float | None = None
        self.hidden_count, self.per_public = hidden_count, per_public
        self.slowest_public_s = 0.0

    def public_shape(self, seconds: float) -> None:
        """A public shape ran for `seconds`: the budget follows the slowest (hidden_budget)."""
        self.slowest_public_s = max(self.slowest_public_s, seconds)

    def start(self) -> None:
        if self.started is None:
            self.started = self.clock()
            self.budget_s = hidden_budget(self.budget_s, self.hidden_count, self.per_public,
                                          self.slowest_public_s)

    def hold_s(self) -> float:
        """Seconds left to wait now, the hidden tier having ended (0: none began)."""
        if self.started is None:
            return 0.0
        elapsed = self.clock() - self.started
        return max(0.0, release_delay(elapsed, self.budget_s, self.quantum_s) - elapsed)


def hold_until_release(clock: HiddenTierClock, check_stop: CheckStop | None,
                       sleep: Callable[[float], None] | None = None) -> None:
    """Wait out the hidden tier's release time, a second at a time: a stop (a cancel, the
    portal's sweep) ends the wait, as it would a shape."""
    deadline = clock.clock() + clock.hold_s()
    while (left := deadline - clock.clock()) > 0:
        if check_stop is not None:
            check_stop()
        (sleep or time.sleep)(min(left, 1.0))


def public_operator(operator: OperatorFiles, folder: Path) -> PublicOperator:
    """The spec's public files of the operator written into a folder of its own under
    `folder` (a temporary one the run removes), and loaded from there."""
    operator_dir = folder / operator.name
    operator_dir.mkdir()
    for name, text in operator.public_files().items():
        (operator_dir / name).write_text(text, encoding="utf-8")
    return load_public_operator(operator_dir, folder)


def run_ncu_profile_spec(spec: dict[str, Any], settings: SandboxSettings) -> dict[str, Any]:
    """A team's ncu profile of one shape (protocol.ncu_profile_spec), run in the candidate's
    sandbox (harness/ncu/sandbox.py); its result as JSON, with `error` where it gave none."""
    from evaluation.harness.ncu.sandbox import NcuProfile, profile_shape

    shape_id = str(spec.get("shape_id"))
    if spec.get("version") != SPEC_VERSION:
        return NcuProfile(shape_id=shape_id, error=f"spec version {spec.get('version')!r}: "
                          f"this worker runs version {SPEC_VERSION}").to_dict()
    try:
        ncu = NcuSpec.from_wire(spec)
        with tempfile.TemporaryDirectory(prefix="atrex-ncu-") as folder:
            public = public_operator(ncu.operator, Path(folder))
            profile = profile_shape(public, ncu.candidate_source, public.shape(shape_id),
                                    dsl=ncu.dsl, settings=settings,
                                    hbm_peak_bytes_per_s=ncu.hbm_bytes_per_s)
    except (HarnessError, ReleaseError, OSError, KeyError) as exc:
        log.warning("ncu profile %s: %s", spec.get("profile_id"), exc)
        return NcuProfile(shape_id=shape_id, error=f"{type(exc).__name__}: {exc}").to_dict()
    return profile.to_dict()


def run_job_spec(spec: dict[str, Any], publish: Publish,
                 settings: EvaluationSettings | None = None, *, run: str | None = None,
                 worker: str | None = None, check_stop: CheckStop | None = None,
                 warm: WarmChildren | None = None) -> None:
    """Evaluate `spec`, reporting through `publish`.

    `check_stop` is called before the first shape and after each one; whatever it raises
    ends the run there, without a report (the portal asked for it and ignores this run).
    """
    ids: dict[str, Any] = {"job_id": spec["job_id"], "attempt": spec["attempt"],
                           "worker": worker or socket.gethostname(), "run": run or new_run_id()}
    stopped: list[BaseException] = []  # what check_stop raised: it passes through unreported

    def report(message: Report) -> None:
        publish(message.kind, message.payload())

    def stop_here() -> None:
        if check_stop is not None:
            try:
                check_stop()
            except BaseException as exc:
                stopped.append(exc)
                raise

    if spec.get("version") != SPEC_VERSION:
        report(Failed(**ids, reason=f"job spec version {spec.get('version')!r}: this worker "
                      f"runs version {SPEC_VERSION}", infrastructure=True))
        return
    try:
        job_spec = JobSpec.from_wire(spec)
    except (KeyError, TypeError) as exc:
        report(Failed(**ids, reason=f"a malformed job spec: {type(exc).__name__}: {exc}",
                      infrastructure=True))
        return
    device = (settings.device if settings and settings.device else None) or worker_device()
    cannot = unavailable_reason(job_spec.dsl, device.split(":")[0])
    if cannot is not None:
        # Not the candidate's fault and not a passing fault of this host: said for the job,
        # never a crash, never a verdict from an adapter that does not know the DSL.
        report(Failed(**ids, reason=cannot, infrastructure=False))
        return
    if warm is not None and warm.dsl != job_spec.dsl:
        warm = None  # the worker's children are started for its usual DSL
    hidden_clock = HiddenTierClock(job_spec.hidden_budget_s, job_spec.hidden_quantum_s,
                                   hidden_count=len(json.loads(
                                       job_spec.operator.hidden_shapes_json or "{}")),
                                   per_public=job_spec.hidden_budget_per_public)
    try:
        with tempfile.TemporaryDirectory(prefix="atrex-job-") as folder:
            public = public_operator(job_spec.operator, Path(folder))
            hidden = _hidden_shapes(job_spec)
            public_count = len(public.shapes)
            job = EvaluationRequest(
                operator=public, candidate_source=job_spec.candidate_source,
                tolerance=Tolerance(atol=job_spec.atol, rtol=job_spec.rtol), dsl=job_spec.dsl,
                dsl_ratio_threshold=job_spec.dsl_ratio_threshold, seed=job_spec.seed,
                hidden_shapes=hidden)
            # The mode up front, so the portal can mark an interpreter run from its first shape.
            report(Started(**ids, shapes_total=public_count + len(hidden),
                           mode=evaluation_mode(device.split(":")[0])))
            stop_here()
            if hidden and not public_count:
                hidden_clock.start()

            def progress(shape: ShapeReport, done: int, total: int) -> None:
                stop_here()  # a stopped run's last shape was cut short: not reported
                report(Progress(**ids, done=done, total=total, shape=json_safe(asdict(shape))))
                if done <= public_count:
                    hidden_clock.public_shape(shape.seconds)
                if hidden and done == public_count:
                    hidden_clock.start()  # the hidden shapes come next

            result = evaluate(job, settings or EvaluationSettings(), progress, warm=warm)
    except (HarnessError, ReleaseError, OSError) as exc:
        report(Failed(**ids, reason=f"{type(exc).__name__}: {exc}", infrastructure=True))
        hold_until_release(hidden_clock, check_stop)
        return
    except Exception as exc:
        if stopped and exc is stopped[-1]:
            raise
        # A fault of the evaluator itself (the candidate's faults end as shape results):
        # reported at once, so the job fails visibly instead of staying "running" until
        # the sweeper finds it silent and runs it again, into the same fault.
        log.exception("job %s attempt %s: the evaluator failed", job_spec.job_id,
                      job_spec.attempt)
        report(Failed(**ids, reason=f"the evaluator failed: {type(exc).__name__}: "
                                    f"{str(exc)[:1000]}", infrastructure=True))
        hold_until_release(hidden_clock, check_stop)
        return
    report(Result(**ids, result=result.to_dict()))
    hold_until_release(hidden_clock, check_stop)
