"""What the web tier and the GPU workers say to each other, defined once for both sides.

The two sides share a broker and nothing else: the web tier (Django, the database, the
hidden files) sends job specs to `eval.<hardware>` and stop messages to a fanout exchange;
a GPU worker (evaluation/worker/, no Django, no hidden files) sends progress, heartbeats and
results to `results`, where the web tier's `submissions.record_event` task stores them.
Those reports are the typed messages below (`Started`, `Progress`, `Heartbeat`, `Result`,
`Failed`), named on the wire by their `EventKind`, and read back by `decode_report`.

A job spec holds public data only: the operator's public files, its shapes, the
candidate's source, the DSL, a secret seed, and the comparison tolerance (the worker
compares; the sandboxed child never receives it, and no message to a team names it).
The one exception is the release's hidden shapes of the operator (`hidden_shapes_json`,
ranked submissions only): the worker keeps them in memory for the job, never writes them
to disk or a log, and gives the child each one only in that shape's requests, after every
public shape (evaluation.harness.request.EvaluationRequest.hidden_shapes).

The hidden tier has no clock a team can read (docs/teams.md, "Hidden shapes"): both sides
hold its end until a release time fixed when it begins, its budget (`hidden_budget_s`, the
release's budget per hidden shape times the job's hidden shapes) after its start, pushed to
the next multiple of `hidden_quantum_s` past the budget when it overruns (`release_delay`).
The web tier shows nothing of the hidden tier, and ends the job, only then; the worker takes
no next job before then, so the next job's start tells nothing either.

Imports no Django.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from celery import Celery
from kombu.entity import Exchange

SPEC_VERSION = 3  # 2: hidden_shapes_json; 3: hidden_budget_s, hidden_quantum_s
EVALUATE_TASK = "evaluation.evaluate_job"  # GPU side: runs one job spec
RECORD_EVENT_TASK = "submissions.record_event"  # web side: stores one report
NCU_PROFILE_TASK = "evaluation.ncu_profile"  # GPU side: a team's ncu profile of one shape
RECORD_NCU_TASK = "submissions.record_ncu_profile"  # web side: stores its result
RECORD_WORKER_TASK = "submissions.record_worker"  # web side: stores a worker's announcement
RESULTS_QUEUE = "results"
STOP_EXCHANGE = Exchange("atrex.stop", type="fanout", durable=False, auto_delete=False)
FILESYSTEM_BROKER = "filesystem://"
# kombu's filesystem transport, with whole-message writes (evaluation/broker.py)
FILESYSTEM_TRANSPORT = "evaluation.broker:Transport"


def eval_queue(hardware: str) -> str:
    """The queue GPU workers of one hardware profile consume."""
    return f"eval.{hardware}"


@dataclass(frozen=True)
class OperatorFiles:
    """An operator's public files as a spec carries them (their text), and, in a job spec,
    the release's hidden shapes of it (`hidden_shapes_json`; None in an ncu spec, which has
    no such key)."""

    name: str
    reference_py: str
    input_py: str
    shapes_json: str
    hidden_shapes_json: str | None = None

    def public_files(self) -> dict[str, str]:
        """File name -> text: what the worker writes into the operator's folder."""
        return {"reference.py": self.reference_py, "input.py": self.input_py,
                "shapes.json": self.shapes_json}

    def to_wire(self) -> dict[str, str]:
        wire = {"name": self.name, "reference_py": self.reference_py, "input_py": self.input_py,
                "shapes_json": self.shapes_json}
        if self.hidden_shapes_json is not None:
            wire["hidden_shapes_json"] = self.hidden_shapes_json
        return wire

    @classmethod
    def from_wire(cls, raw: Mapping[str, Any], *, hidden: bool = False) -> OperatorFiles:
        return cls(name=raw["name"], reference_py=raw["reference_py"], input_py=raw["input_py"],
                   shapes_json=raw["shapes_json"],
                   hidden_shapes_json=(raw.get("hidden_shapes_json") or "") if hidden else None)


@dataclass(frozen=True)
class JobSpec:
    """One evaluation job as the web tier sends it to `eval.<hardware>` (module docstring:
    what it holds and what it never does). On the wire a dict (`to_wire`); the worker reads
    it back with `from_wire` once it has checked the version."""

    job_id: int
    attempt: int
    hardware: str
    operator: OperatorFiles
    candidate_source: str
    atol: float
    rtol: float
    dsl: str
    dsl_ratio_threshold: float
    seed: int
    heartbeat_s: float = 0
    hidden_budget_s: float = 0
    hidden_quantum_s: float = 0
    hidden_budget_per_public: float = 0
    version: int = SPEC_VERSION

    def to_wire(self) -> dict[str, Any]:
        return {
            "version": self.version, "job_id": self.job_id, "attempt": self.attempt,
            "hardware": self.hardware, "operator": self.operator.to_wire(),
            "candidate_source": self.candidate_source,
            "tolerance": {"atol": self.atol, "rtol": self.rtol},
            "dsl": self.dsl, "dsl_ratio_threshold": self.dsl_ratio_threshold, "seed": self.seed,
            "heartbeat_s": self.heartbeat_s, "hidden_budget_s": self.hidden_budget_s,
            "hidden_quantum_s": self.hidden_quantum_s,
            "hidden_budget_per_public": self.hidden_budget_per_public,
        }

    @classmethod
    def from_wire(cls, raw: Mapping[str, Any]) -> JobSpec:
        """The spec a worker took (KeyError where a field every version has is missing;
        the budgets, which older specs lack, read as 0)."""
        return cls(job_id=raw["job_id"], attempt=raw["attempt"], hardware=raw.get("hardware", ""),
                   operator=OperatorFiles.from_wire(raw["operator"], hidden=True),
                   candidate_source=raw["candidate_source"], atol=raw["tolerance"]["atol"],
                   rtol=raw["tolerance"]["rtol"], dsl=raw["dsl"],
                   dsl_ratio_threshold=raw["dsl_ratio_threshold"], seed=raw["seed"],
                   heartbeat_s=float(raw.get("heartbeat_s") or 0),
                   hidden_budget_s=float(raw.get("hidden_budget_s") or 0),
                   hidden_quantum_s=float(raw.get("hidden_quantum_s") or 0),
                   hidden_budget_per_public=float(raw.get("hidden_budget_per_public") or 0),
                   version=raw["version"])


def job_spec(*, job_id: int, attempt: int, operator: str, reference_py: str, input_py: str,
             shapes_json: str, candidate_source: str, atol: float, rtol: float, dsl: str,
             dsl_ratio_threshold: float, hardware: str, seed: int,
             heartbeat_s: float = 0, hidden_shapes_json: str = "",
             hidden_budget_s: float = 0, hidden_quantum_s: float = 0,
             hidden_budget_per_public: float = 0) -> dict[str, Any]:
    """A job spec as it goes on the wire (JobSpec.to_wire)."""
    return JobSpec(
        job_id=job_id, attempt=attempt, hardware=hardware,
        operator=OperatorFiles(name=operator, reference_py=reference_py, input_py=input_py,
                               shapes_json=shapes_json, hidden_shapes_json=hidden_shapes_json),
        candidate_source=candidate_source, atol=atol, rtol=rtol, dsl=dsl,
        dsl_ratio_threshold=dsl_ratio_threshold, seed=seed, heartbeat_s=heartbeat_s,
        hidden_budget_s=hidden_budget_s, hidden_quantum_s=hidden_quantum_s,
        hidden_budget_per_public=hidden_budget_per_public).to_wire()


def hidden_budget(minimum_s: float, hidden_count: int, per_public: float,
                  slowest_public_s: float) -> float:
    """The seconds a job's hidden tier has before its release: the release's minimum for the
    job, or `per_public` (Release.hidden_budget_per_public, 3 by default) times its slowest
    public shape for each hidden one, whichever is longer. Each hidden shape is a public one
    with one size changed, so an honest kernel's fits; a budget the job's own shapes set
    costs the GPU host seconds of waiting, not minutes. Both sides compute it from the same
    reports (the worker from the shapes it ran, the web tier from their progress reports);
    the candidate can know it too, as it sets its public shapes' times, and learns nothing
    from it."""
    return max(minimum_s, hidden_count * per_public * max(slowest_public_s, 0.0))


def release_delay(elapsed_s: float, budget_s: float, quantum_s: float) -> float:
    """When, after the hidden tier began, its end may be shown (web tier) and the worker may
    take its next job: the budget when the tier ended within it; past it, the next multiple
    of the quantum after the budget (a quantum of 0: the end itself, no hold past the budget).

    What a team can learn from the moment is which of these it was: at most
    log2(1 + ceil((longest - budget) / quantum)) bits per job (docs/teams.md)."""
    if elapsed_s <= budget_s:
        return budget_s
    if quantum_s <= 0:
        return elapsed_s
    return budget_s + math.ceil((elapsed_s - budget_s) / quantum_s) * quantum_s


@dataclass(frozen=True)
class NcuSpec:
    """A team's ncu profile of one public shape of its candidate (evaluation/harness/
    ncu/sandbox.py): the operator's public files, the candidate, the shape, the HBM peak its
    DRAM throughput is read against. No tolerance, no seed: nothing is compared or scored."""

    profile_id: int
    shape_id: str
    operator: OperatorFiles
    candidate_source: str
    dsl: str
    hbm_bytes_per_s: float
    version: int = SPEC_VERSION

    def to_wire(self) -> dict[str, Any]:
        return {"version": self.version, "profile_id": self.profile_id,
                "shape_id": self.shape_id, "operator": self.operator.to_wire(),
                "candidate_source": self.candidate_source, "dsl": self.dsl,
                "hbm_bytes_per_s": self.hbm_bytes_per_s}

    @classmethod
    def from_wire(cls, raw: Mapping[str, Any]) -> NcuSpec:
        """The spec a worker took (KeyError where a field is missing)."""
        return cls(profile_id=raw["profile_id"], shape_id=str(raw.get("shape_id")),
                   operator=OperatorFiles.from_wire(raw["operator"]),
                   candidate_source=raw["candidate_source"], dsl=str(raw["dsl"]),
                   hbm_bytes_per_s=float(raw["hbm_bytes_per_s"]), version=raw["version"])


def ncu_profile_spec(*, profile_id: int, operator: str, reference_py: str, input_py: str,
                     shapes_json: str, shape_id: str, candidate_source: str, dsl: str,
                     hbm_bytes_per_s: float) -> dict[str, Any]:
    """An ncu spec as it goes on the wire (NcuSpec.to_wire)."""
    return NcuSpec(profile_id=profile_id, shape_id=shape_id,
                   operator=OperatorFiles(name=operator, reference_py=reference_py,
                                          input_py=input_py, shapes_json=shapes_json),
                   candidate_source=candidate_source, dsl=dsl,
                   hbm_bytes_per_s=hbm_bytes_per_s).to_wire()


def stop_message(*, job_id: int, up_to_attempt: int, run: str = "") -> dict[str, Any]:
    """Stops every run of `job_id` at attempt <= up_to_attempt (only `run`, if given)."""
    return {"job_id": job_id, "up_to_attempt": up_to_attempt, "run": run}


def applies_to(message: dict[str, Any], *, job_id: int, attempt: int, run: str) -> bool:
    try:
        return (message.get("job_id") == job_id and attempt <= int(message["up_to_attempt"])
                and message.get("run", "") in ("", run))
    except (KeyError, TypeError, ValueError):
        return False


def publish_stop(app: Celery, message: dict[str, Any]) -> None:
    with app.producer_or_acquire() as producer:
        producer.publish(message, exchange=STOP_EXCHANGE, routing_key="", serializer="json",
                         declare=[STOP_EXCHANGE], retry=True,
                         retry_policy={"max_retries": 5, "interval_start": 0.2,
                                       "interval_step": 0.5, "interval_max": 2})


class EventKind(StrEnum):
    """What a report on `results` is: the first argument of the record_event task. A str, so
    the JSON on the wire is the plain name."""

    STARTED = "started"  # a run took the job's attempt
    PROGRESS = "progress"  # one shape done
    HEARTBEAT = "heartbeat"  # still alive, between shapes
    RESULT = "result"  # the whole evaluation
    FAILED = "failed"  # no result will come


@dataclass(frozen=True)
class Report:
    """What every report carries: which run of which attempt of which job sent it."""

    kind: ClassVar[EventKind]
    job_id: int
    attempt: int
    worker: str
    run: str

    def payload(self) -> dict[str, Any]:
        """The second argument of the record_event task (the kind is the first)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Started(Report):
    kind: ClassVar[EventKind] = EventKind.STARTED
    shapes_total: int
    mode: str  # "gpu" or "cpu-interpreter": the portal marks an interpreter run from the start


@dataclass(frozen=True)
class Progress(Report):
    kind: ClassVar[EventKind] = EventKind.PROGRESS
    done: int
    total: int
    shape: dict[str, Any]  # one shape's result (harness results.py), as JSON


@dataclass(frozen=True)
class Heartbeat(Report):
    kind: ClassVar[EventKind] = EventKind.HEARTBEAT


@dataclass(frozen=True)
class Result(Report):
    kind: ClassVar[EventKind] = EventKind.RESULT
    result: dict[str, Any]  # the EvaluationResult, as JSON


@dataclass(frozen=True)
class Failed(Report):
    kind: ClassVar[EventKind] = EventKind.FAILED
    reason: str
    infrastructure: bool  # the host's or the evaluator's fault, not the candidate's


def decode_report(kind: str, payload: Mapping[str, Any]) -> Report | None:
    """One report from `results` as its typed message, as leniently as the wire has always
    been read: a field a worker did not send takes its default. None for an unknown kind,
    or a report that names no job and attempt of a spec (the worker reports the ids the
    spec gave it)."""
    try:
        event = EventKind(kind)
    except ValueError:
        return None
    job_id, attempt = payload.get("job_id"), payload.get("attempt")
    if not isinstance(job_id, int) or not isinstance(attempt, int):
        return None
    worker, run = str(payload.get("worker", "")), str(payload.get("run", ""))
    if event is EventKind.STARTED:
        return Started(job_id, attempt, worker, run, _count(payload.get("shapes_total")),
                       str(payload.get("mode") or ""))
    if event is EventKind.PROGRESS:
        return Progress(job_id, attempt, worker, run, _count(payload.get("done")),
                        _count(payload.get("total")), payload["shape"])
    if event is EventKind.RESULT:
        return Result(job_id, attempt, worker, run, payload["result"])
    if event is EventKind.FAILED:
        return Failed(job_id, attempt, worker, run,
                      str(payload.get("reason", "evaluation failed")),
                      bool(payload.get("infrastructure", False)))
    return Heartbeat(job_id, attempt, worker, run)


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0


# A worker says what it can evaluate when it starts and every this many seconds after, so the
# portal offers teams what its workers run (and knows when none is left).
ANNOUNCE_EVERY_S = 60


@dataclass(frozen=True)
class Announcement:
    """What a GPU worker can evaluate: the queues it consumes (eval.<hardware>, so which
    hardware), whether it times kernels on a GPU or checks them in Triton's CPU interpreter,
    the device, and the DSLs it can run there. Sent to `results` as RECORD_WORKER_TASK."""

    worker: str
    queues: tuple[str, ...]
    mode: str  # "gpu" or "cpu-interpreter", as Started reports it
    device: str  # "NVIDIA H200", or "cpu"
    dsls: tuple[str, ...]
    evaluator_version: str = ""

    def payload(self) -> dict[str, Any]:
        return {"worker": self.worker, "queues": list(self.queues), "mode": self.mode,
                "device": self.device, "dsls": list(self.dsls),
                "evaluator_version": self.evaluator_version}

    @property
    def hardware(self) -> tuple[str, ...]:
        """The hardware profiles whose team queues it consumes (eval.H200 -> H200)."""
        names = [q.removeprefix("eval.") for q in self.queues
                 if q.startswith("eval.") and not q.endswith(LOW_PRIORITY_SUFFIX)]
        return tuple(dict.fromkeys(names))


def decode_announcement(payload: Mapping[str, Any]) -> Announcement | None:
    """An announcement from `results`; None for one without a worker name or queues."""
    worker, queues = payload.get("worker"), payload.get("queues")
    if not isinstance(worker, str) or not worker or not isinstance(queues, list):
        return None

    def names(value: object) -> tuple[str, ...]:
        return tuple(str(v)[:100] for v in value) if isinstance(value, list) else ()

    return Announcement(worker=worker[:200], queues=names(queues),
                        mode=str(payload.get("mode") or "")[:30],
                        device=str(payload.get("device") or "")[:200],
                        dsls=names(payload.get("dsls")),
                        evaluator_version=str(payload.get("evaluator_version") or "")[:30])


# Baselines and admin re-runs go to eval.<hardware>.low: a GPU worker takes them only while
# no team job waits (broker.PriorityCycle; Redis's "priority" queue order). RabbitMQ has no
# such order between queues: there the two are taken in turn.
LOW_PRIORITY_SUFFIX = ".low"


def low_priority_queue(queue: str) -> str:
    return queue + LOW_PRIORITY_SUFFIX


def worker_queues(queues: str) -> str:
    """The -Q list of a GPU worker given its eval.<hardware> queues (comma-separated): every
    team queue, then every low-priority one, in that order."""
    named = [q.strip() for q in queues.split(",") if q.strip()]
    high = [q for q in named if not q.endswith(LOW_PRIORITY_SUFFIX)]
    low = [low_priority_queue(q) for q in high]
    low += [q for q in named if q.endswith(LOW_PRIORITY_SUFFIX) and q not in low]
    return ",".join(high + low)


def broker_settings(url: str, folder: Path, *, visibility_timeout_s: int = 3600) -> dict[str, Any]:
    """Celery's broker settings, the same for both sides (lower-case Celery names).

    `folder` holds the filesystem broker's messages (the embedded default: no server).
    """
    settings: dict[str, Any] = {"broker_url": url}
    if url == FILESYSTEM_BROKER:
        settings["broker_transport"] = FILESYSTEM_TRANSPORT
        settings["broker_transport_options"] = {
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"),
            # Exchange tables; kombu's default is ./control, i.e. wherever the process started.
            "control_folder": str(folder / "control"),
            "store_processed": False,
        }
        # The transport expects them to exist. Messages carry candidate source and secret
        # seeds: the folders are the broker user's alone (0700), as are the files (broker.py).
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
        for name in ("queue", "processed", "control"):
            (folder / name).mkdir(exist_ok=True)
            (folder / name).chmod(0o700)
    elif url.startswith(("redis://", "rediss://")):
        # A message taken by a worker that died unacknowledged (SIGKILL, lost host) is
        # delivered again after this many seconds. It must exceed the longest job, or a
        # running job is delivered twice (harmless: only one run holds the claim, but GPU
        # time is wasted).
        settings["broker_transport_options"] = {"visibility_timeout": visibility_timeout_s,
                                                # queues in the worker's order, from the first
                                                "queue_order_strategy": "priority"}
    return settings


# Both sides: a task is acknowledged when it ends, and one that a dying worker held goes back.
TASK_SETTINGS: dict[str, Any] = {
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
    "worker_prefetch_multiplier": 1,
    "task_serializer": "json",
    "accept_content": ["json"],
}
