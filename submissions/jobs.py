"""The EvaluationJob life cycle: every change of a job's status happens here.

    queued --(a worker's "started")--> running --("result")--> scored
                                               --("failed")--> failed
    queued or running --(job_cancel)--> cancelled
    running, silent for ATREX_JOB_STALE_SECONDS --(jobs_sweep)--> queued (next attempt),
                                                                   or failed after the last
    any --(job_rerun, admins)--> queued (next attempt)

A job with hidden shapes has no clock a team can read while they run (docs/teams.md,
"Hidden shapes"). When its last public shape is stored, its hidden tier begins and a release
time is fixed: the release's budget per hidden shape times its hidden shapes later. The
hidden shapes' reports, and the worker's result or failure, are held (`held`, admins only)
and the job stays running, its public shapes done, until then:

    running --("result"/"failed" after the hidden tier began)--> running, held
            --(job_release, at release_at)--> scored | failed, finished_at = release_at

A tier that ends past its budget is released at the next multiple of the release's quantum
past it (protocol.release_delay, which the worker waits out too before its next job).

Each attempt is numbered (`attempts`) and sent as its own Celery task (`attempt_task_id`);
reports of an older attempt, or of a run that does not hold the attempt, are ignored and
that run is told to stop. A job that ends, or goes back to the queue, rewrites its
submission's environment from the latest attempts and asks for a rescore of the submission
once the transaction commits (boards rank whole evaluations only).

Jobs are created with their submission (submissions/services.py); what one shape's report
stores is in submissions/results.py.
"""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from evaluation.catalog.models import Shape
from evaluation.catalog.selectors import evaluated_shape_ids
from evaluation.protocol import (
    EVALUATE_TASK,
    RESULTS_QUEUE,
    EventKind,
    Failed,
    Heartbeat,
    Progress,
    Report,
    Result,
    Started,
    decode_report,
    hidden_budget,
    job_spec,
    low_priority_queue,
    publish_stop,
    release_delay,
    stop_message,
)
from portal.audit.models import AuditEntry, audit
from submissions.environment import submission_environment_update
from submissions.models import EvaluationJob, ShapeResult
from submissions.results import store_shape

RESCORE_TASK = "leaderboard.rescore_submission"  # by name: leaderboard sits above this app


def dispatch_job(job_id: int) -> None:
    """Start a new attempt of a job: a spec with public data only, to eval.<hardware>."""
    with transaction.atomic():
        job = _locked_job(job_id)
        if job is None or job.status not in EvaluationJob.Status.active():
            return
        send = _next_attempt(job, low_priority=bool(job.candidate.submission.baseline))
    send()


def attempt_task_id(job_id: int, attempt: int) -> str:
    """The Celery task id of one attempt: known without storing it, so it can be revoked."""
    return f"job-{job_id}-attempt-{attempt}"


def _locked_job(job_id: int, *, skip_locked: bool = False) -> EvaluationJob | None:
    return (EvaluationJob.objects.select_for_update(of=("self",), skip_locked=skip_locked)
            .select_related("candidate__operator__release", "candidate__operator__hidden",
                            "candidate__submission__hardware").filter(pk=job_id).first())


def _next_attempt(job: EvaluationJob, *, low_priority: bool) -> Callable[[], None]:
    """Number the next attempt of a locked job; return what sends its spec (after commit),
    to eval.<hardware>, or to its .low queue for a baseline's job or an admin's re-run.

    Reports of earlier attempts are ignored from the moment this commits.
    """
    job.attempts += 1
    job.status = EvaluationJob.Status.QUEUED
    job.run = ""
    job.mode = EvaluationJob.Mode.UNKNOWN  # the worker that takes this attempt reports it
    job.low_priority = low_priority
    job.save(update_fields=["attempts", "status", "run", "mode", "low_priority",
                            *_hold_clear(job)])
    candidate = job.candidate
    operator = candidate.operator
    release = operator.release
    hardware = candidate.submission.hardware
    spec = job_spec(
        job_id=job.pk, attempt=job.attempts, operator=operator.name,
        reference_py=operator.reference_py, input_py=operator.input_py,
        shapes_json=_job_shapes_json(job), candidate_source=candidate.source,
        atol=operator.hidden.atol, rtol=operator.hidden.rtol, dsl=job.candidate.dsl,
        dsl_ratio_threshold=release.dsl_ratio_threshold, hardware=hardware.name,
        seed=secrets.randbits(63), heartbeat_s=settings.ATREX_JOB_HEARTBEAT_SECONDS,
        hidden_shapes_json=_job_hidden_shapes_json(job),
        hidden_budget_s=hidden_budget_s(job), hidden_quantum_s=release.hidden_release_quantum_s,
        hidden_budget_per_public=release.hidden_budget_per_public)
    queue = low_priority_queue(hardware.queue) if low_priority else hardware.queue
    task_id = attempt_task_id(job.pk, job.attempts)

    def send() -> None:
        current_app.send_task(EVALUATE_TASK, args=[spec], queue=queue, task_id=task_id)

    return send


def _stop_attempts(job_id: int, up_to_attempt: int) -> None:
    """Tell GPU hosts to drop attempts 1..up_to_attempt: queued ones are revoked, running
    ones stopped (their sandboxed child killed)."""
    current_app.control.revoke([attempt_task_id(job_id, n) for n in range(1, up_to_attempt + 1)])
    publish_stop(current_app, stop_message(job_id=job_id, up_to_attempt=up_to_attempt))


@dataclass(frozen=True)
class SweepReport:
    requeued: list[int]
    failed: list[int]


def jobs_sweep(*, now: datetime | None = None) -> SweepReport:
    """Run again every running job whose worker stopped reporting; fail it after the last
    allowed attempt, with a reason the team reads on its submission.

    Each job is locked and checked again under the lock, so a report that arrived in the
    meantime wins; a job another sweep holds is skipped.
    """
    now = now or timezone.now()
    jobs_release_due(now=now)
    stale_seconds = settings.ATREX_JOB_STALE_SECONDS
    # a job held for its hidden tier's release has ended on its worker: no heartbeat is due
    stale = (Q(status=EvaluationJob.Status.RUNNING, worker_ended_at__isnull=True)
             & (Q(heartbeat_at__lt=now - timedelta(seconds=stale_seconds))
                | Q(heartbeat_at__isnull=True)))
    report = SweepReport(requeued=[], failed=[])
    for job_id in EvaluationJob.objects.filter(stale).values_list("pk", flat=True):
        with transaction.atomic():
            job = _locked_job(job_id, skip_locked=True)
            if job is None or not EvaluationJob.objects.filter(stale, pk=job_id).exists():
                continue
            before = {"status": job.status, "attempts": job.attempts, "worker": job.worker}
            attempt = job.attempts
            if attempt >= settings.ATREX_JOB_MAX_ATTEMPTS:
                job.status = EvaluationJob.Status.FAILED
                job.error = (f"The evaluation was abandoned after {attempt} attempts: the GPU "
                             f"worker stopped reporting for {stale_seconds} s (last worker: "
                             f"{job.worker or 'unknown'}). This is an infrastructure failure "
                             "and does not count against your quota; submit again or ask an "
                             "admin to re-run it.")
                job.infrastructure_failure = True
                job.finished_at = now
                job.save(update_fields=["status", "error", "infrastructure_failure",
                                        "finished_at"])
                _job_ended(job.candidate.submission_id)
                report.failed.append(job.pk)
            else:
                # the same queue as before: a baseline's stays behind the teams'
                transaction.on_commit(_next_attempt(job, low_priority=job.low_priority))
                report.requeued.append(job.pk)
            # After the new attempt is sent: a broker error here must not stop that.
            transaction.on_commit(functools.partial(_stop_attempts, job.pk, attempt),
                                  robust=True)
            audit(actor=None, action="job.sweep", target=f"job:{job.pk}", before=before,
                  after={"status": job.status, "attempts": job.attempts})
    return report


def _job_shapes_json(job: EvaluationJob) -> str:
    """shapes.json restricted to the shapes this job covers (fixed when it was created)."""
    keep = set(job.shape_ids or evaluated_shape_ids(job.candidate.operator))
    shapes = json.loads(job.candidate.operator.shapes_json)
    return json.dumps({k: v for k, v in shapes.items() if k in keep})


def _job_hidden_shapes_json(job: EvaluationJob) -> str:
    """The hidden shapes this job covers, in shapes.json's format ("" for none)."""
    if not job.hidden_shape_ids:
        return ""
    rows = {shape.shape_id: shape for shape in Shape.every_tier.filter(
        operator=job.candidate.operator, hidden=True, shape_id__in=job.hidden_shape_ids)}
    return json.dumps({shape_id: {"init_kwargs": rows[shape_id].init_kwargs,
                                  "input_kwargs": rows[shape_id].input_kwargs}
                       for shape_id in job.hidden_shape_ids if shape_id in rows})


def hidden_failure(job: EvaluationJob, reason: str) -> bool:
    """Whether a job's failure may tell of a hidden shape: it came while one ran (they run
    after the public ones), or its text names one. Such a reason is kept for the admins
    (`hidden_error`) and the team reads HIDDEN_FAILURE instead."""
    if not job.hidden_shape_ids:
        return False
    public_done = ShapeResult.objects.filter(job=job, attempt=job.attempts).count()
    return public_done >= len(job.shape_ids) or any(i in reason for i in job.hidden_shape_ids)


HIDDEN_FAILURE = ("The evaluation failed while it ran the release's hidden shapes: what went "
                  "wrong is not shown, since it could tell of them (docs/teams.md, \"Hidden "
                  "shapes\"). Your public shapes' results stand; an admin can read the reason.")


def job_cancel(*, job: EvaluationJob) -> bool:
    """Cancel a queued or running job; its GPU host is told to stop and kill its child."""
    with transaction.atomic():
        locked = _locked_job(job.pk)
        if locked is None or locked.status not in EvaluationJob.Status.active():
            return False
        locked.status = EvaluationJob.Status.CANCELLED
        locked.finished_at = timezone.now()
        locked.save(update_fields=["status", "finished_at"])
        _job_ended(locked.candidate.submission_id)
        transaction.on_commit(lambda: _stop_attempts(locked.pk, locked.attempts), robust=True)
    return True


def job_rerun(*, job: EvaluationJob, actor: object,
              unless_rerun_within: timedelta | None = None) -> bool:
    """Evaluate again as a new attempt (admins; no quota). Results of older attempts stay.

    With `unless_rerun_within`, a job re-run that recently and still queued is left alone
    (False): a second click on the admin's "Re-run" must not replace the attempt the first
    click queued. A job queued longer (its message lost, say) is re-run."""
    with transaction.atomic():
        locked = _locked_job(job.pk)
        if locked is None:
            return False
        if unless_rerun_within is not None and locked.status == EvaluationJob.Status.QUEUED \
                and AuditEntry.objects.filter(action="job.rerun", target=f"job:{job.pk}",
                                              at__gte=timezone.now() - unless_rerun_within
                                              ).exists():
            return False
        before = {"status": locked.status, "attempts": locked.attempts}
        locked.error, locked.infrastructure_failure = "", False
        locked.finished_at, locked.shapes_done = None, 0
        locked.save(update_fields=["error", "infrastructure_failure", "finished_at",
                                   "shapes_done", *_hold_clear(locked)])
        old_attempt = locked.attempts
        send = _next_attempt(locked, low_priority=True)  # an admin's: after the teams' jobs
        _job_ended(locked.candidate.submission_id)  # off the boards until it ends
        audit(actor=actor, action="job.rerun", target=f"job:{job.pk}", before=before,
              after={"status": "queued"})
        if old_attempt:
            transaction.on_commit(lambda: _stop_attempts(locked.pk, old_attempt), robust=True)
        transaction.on_commit(send)
    return True


def dispatch_all(job_ids: list[int]) -> None:
    for job_id in job_ids:
        dispatch_job(job_id)


def record_event(kind: str, payload: dict[str, Any]) -> None:
    """Store one report of a GPU host, if it comes from the run that holds the job.

    A run holds the job's current attempt from its "started" report on (a redelivered
    message starts the same attempt again and takes it over: the run before it is dead or
    superseded, and its partial results are dropped). Reports of any other run, of an older
    attempt or of an ended job are ignored, and a run still alive is told to stop.
    """
    report = decode_report(kind, payload)
    if report is None:
        return  # no job of ours: the worker reports the ids the spec gave it
    with transaction.atomic():
        now = timezone.now()
        job = _claimed_job(report, now)
        if job is None:
            return
        changed = _REPORT_HANDLERS[report.kind](job, report, now)
        job.save(update_fields=[*_CLAIM_FIELDS, *changed])


# What _claimed_job may change; each handler returns what it changed besides.
_CLAIM_FIELDS = ["run", "shapes_done", "heartbeat_at", "worker", "status", "started_at",
                 "hidden_started_at", "release_at", "worker_ended_at", "held"]


def _claimed_job(report: Report, now: datetime) -> EvaluationJob | None:
    """The job of `report`, locked and held by the report's run; None when the report is
    stale or another run holds the attempt (a run still going is told to stop)."""
    job = (EvaluationJob.objects.select_for_update(of=("self",))
           .select_related("candidate__operator__hidden", "candidate__operator__release",
                           "candidate__submission__hardware")
           .filter(pk=report.job_id).first())
    if job is None:
        return None
    run = report.run
    if job.status in EvaluationJob.Status.ended() or report.attempt != job.attempts:
        if report.kind not in (EventKind.RESULT, EventKind.FAILED):  # a run still going:
            _stop_on_commit(job.pk, report.attempt, run)  # no use any more
        return None  # stale, or already ended
    if report.kind is EventKind.STARTED and job.run != run:
        if job.run:  # a redelivery: start this attempt afresh with the new run
            ShapeResult.every_tier.filter(job=job, attempt=job.attempts).delete()
            job.shapes_done = 0
            _hold_clear(job)
            _stop_on_commit(job.pk, job.attempts, job.run)  # in case it still runs
        job.run = run
    elif not job.run:
        job.run = run  # its "started" report is still on the way
    elif job.run != run:
        _stop_on_commit(job.pk, job.attempts, run)
        return None  # another run holds this attempt
    job.heartbeat_at = now
    job.worker = report.worker[:200]
    if job.status == EvaluationJob.Status.QUEUED:
        job.status = EvaluationJob.Status.RUNNING
        job.started_at = job.started_at or now
    return job


def _on_started(job: EvaluationJob, report: Started, now: datetime) -> list[str]:
    if job.hidden_shape_ids and not job.shape_ids:
        _hidden_tier_begins(job, now)  # no public shape: the hidden ones come first
    return _reported_mode(job, report.mode)


def _on_heartbeat(job: EvaluationJob, report: Heartbeat, now: datetime) -> list[str]:
    return []  # the claim stored it


def _on_progress(job: EvaluationJob, report: Progress, now: datetime) -> list[str]:
    if _is_hidden(job, report.shape):
        _hold_shape(job, report.shape, now)
        return []
    store_shape(job, report.shape)
    job.shapes_done = ShapeResult.every_tier.filter(job=job, attempt=job.attempts).count()
    if not job.hidden_shape_ids:
        return ["shapes_done"]
    seconds = report.shape.get("seconds")
    if isinstance(seconds, int | float) and seconds > job.held.get("slowest_public_s", 0.0):
        job.held = {**job.held, "slowest_public_s": float(seconds)}  # the budget follows it
    if job.shapes_done >= len(job.shape_ids):
        _hidden_tier_begins(job, now)  # the last public shape: the hidden ones run next
    return ["shapes_done", "held"]


def _on_result(job: EvaluationJob, report: Result, now: datetime) -> list[str]:
    result = report.result
    changed = _reported_mode(job, result.get("mode"))  # before the shapes: their verdicts read it
    for shape in result["shapes"]:
        if _is_hidden(job, shape):
            _hold_shape(job, shape, now)
        else:
            store_shape(job, shape)
    job.shapes_done = ShapeResult.every_tier.filter(job=job, attempt=job.attempts).count()
    job.evaluator_version = str(result.get("evaluator_version", ""))[:30]
    changed += ["shapes_done", "evaluator_version"]
    if job.hidden_shape_ids:
        return changed + _hold_end(job, {"status": EvaluationJob.Status.SCORED.value}, now)
    job.status = EvaluationJob.Status.SCORED
    job.finished_at = now
    _job_ended(job.candidate.submission_id)
    return [*changed, "status", "finished_at"]


def _on_failed(job: EvaluationJob, report: Failed, now: datetime) -> list[str]:
    if job.hidden_started_at is not None:  # a failure in the hidden tier ends with it
        return _hold_end(job, {"status": EvaluationJob.Status.FAILED.value,
                               "reason": report.reason,
                               "infrastructure": report.infrastructure}, now)
    job.status = EvaluationJob.Status.FAILED
    job.error = report.reason
    if hidden_failure(job, job.error):
        job.hidden_error, job.error = job.error, HIDDEN_FAILURE
    job.infrastructure_failure = report.infrastructure
    job.finished_at = now
    _job_ended(job.candidate.submission_id)
    return ["status", "error", "hidden_error", "infrastructure_failure", "finished_at"]


# The hidden tier's hold. What a team may see of a job while it lasts is decided in one
# place, submissions.selectors.job_progress; what is stored here is the admins'.

def hidden_budget_s(job: EvaluationJob) -> float:
    """The release's minimum for a job's hidden tier: its seconds per hidden shape times the
    job's hidden shapes (the worker's spec carries it; protocol.hidden_budget adds what the
    job's slowest public shape asks for)."""
    release = job.candidate.operator.release
    return float(release.hidden_shape_budget_s) * len(job.hidden_shape_ids or ())


def _hidden_tier_begins(job: EvaluationJob, now: datetime) -> None:
    """Fix the release time, once per attempt: the budget after now."""
    if job.hidden_started_at is None:
        job.hidden_started_at = now
        release = job.candidate.operator.release
        budget = hidden_budget(hidden_budget_s(job), len(job.hidden_shape_ids or ()),
                               float(release.hidden_budget_per_public),
                               float(job.held.get("slowest_public_s", 0.0)))
        job.release_at = now + timedelta(seconds=budget)


def _is_hidden(job: EvaluationJob, shape: dict[str, Any]) -> bool:
    return str(shape.get("shape_id")) in (job.hidden_shape_ids or ())


def _hold_shape(job: EvaluationJob, shape: dict[str, Any], now: datetime) -> None:
    """A hidden shape's report kept until the release (a repeated one replaces its own)."""
    _hidden_tier_begins(job, now)  # a report out of order: the tier has begun all the same
    shapes = [s for s in job.held.get("shapes", []) if s.get("shape_id") != shape.get("shape_id")]
    job.held = {**job.held, "shapes": [*shapes, shape]}


def _hold_end(job: EvaluationJob, end: dict[str, Any], now: datetime) -> list[str]:
    """The worker ended the job: keep its end until the release time, pushed past an
    overrun budget to the next quantum (protocol.release_delay); release now if it is due."""
    _hidden_tier_begins(job, now)
    assert job.hidden_started_at is not None and job.release_at is not None
    budget = (job.release_at - job.hidden_started_at).total_seconds()
    elapsed = (now - job.hidden_started_at).total_seconds()
    quantum = float(job.candidate.operator.release.hidden_release_quantum_s)
    job.release_at = job.hidden_started_at + timedelta(
        seconds=release_delay(elapsed, budget, quantum))
    job.worker_ended_at = now
    job.held = {**job.held, "end": end}
    if job.release_at <= now:
        return _release(job)
    job_id, countdown = job.pk, (job.release_at - now).total_seconds()
    transaction.on_commit(lambda: current_app.send_task(
        RELEASE_TASK, args=[job_id], queue=RESULTS_QUEUE, countdown=countdown), robust=True)
    return []


RELEASE_TASK = "submissions.release_job"  # sent for a job's release time (jobs_sweep backs it)


def job_release(job_id: int, *, now: datetime | None = None) -> bool:
    """Show a held job's hidden results and end it, if its release time has come."""
    now = now or timezone.now()
    with transaction.atomic():
        job = _locked_job(job_id)
        if job is None or job.status not in EvaluationJob.Status.active() \
                or job.worker_ended_at is None or job.release_at is None \
                or job.release_at > now:
            return False
        job.save(update_fields=_release(job))
    return True


def release_wait_s(job_id: int) -> float | None:
    """Seconds until a held job's release time; None when it is not held (or is due)."""
    job = EvaluationJob.objects.filter(pk=job_id, status=EvaluationJob.Status.RUNNING,
                                       worker_ended_at__isnull=False).first()
    if job is None or job.release_at is None:
        return None
    left = (job.release_at - timezone.now()).total_seconds()
    return left if left > 0 else None


def jobs_release_due(*, now: datetime | None = None) -> list[int]:
    """Release every held job whose release time has passed (the sweep's backstop for a
    release task lost on the way)."""
    now = now or timezone.now()
    due = EvaluationJob.objects.filter(status=EvaluationJob.Status.RUNNING,
                                       worker_ended_at__isnull=False, release_at__lte=now)
    return [pk for pk in due.values_list("pk", flat=True) if job_release(pk, now=now)]


def _release(job: EvaluationJob) -> list[str]:
    """Store the held hidden shapes and apply the held end, as of the release time: the
    job's end as every team-facing read, board and webhook sees it."""
    for shape in job.held.get("shapes", []):
        store_shape(job, shape)
    end = job.held.get("end", {})
    job.shapes_done = ShapeResult.every_tier.filter(job=job, attempt=job.attempts).count()
    job.finished_at = job.release_at
    changed = ["shapes_done", "finished_at", "status", "held"]
    if end.get("status") == EvaluationJob.Status.FAILED:
        job.status = EvaluationJob.Status.FAILED
        job.hidden_error, job.error = str(end.get("reason", "evaluation failed")), HIDDEN_FAILURE
        job.infrastructure_failure = bool(end.get("infrastructure", False))
        changed += ["error", "hidden_error", "infrastructure_failure"]
    else:
        job.status = EvaluationJob.Status.SCORED
    job.held = {**job.held, "released": True}
    _job_ended(job.candidate.submission_id)
    return changed


def _hold_clear(job: EvaluationJob) -> list[str]:
    """A new attempt, or a new run of one, starts without a hold."""
    job.hidden_started_at = job.release_at = job.worker_ended_at = None
    job.held = {}
    return ["hidden_started_at", "release_at", "worker_ended_at", "held"]


def _reported_mode(job: EvaluationJob, mode: object) -> list[str]:
    """"started" says where the worker runs; the final result says it again."""
    if mode in (EvaluationJob.Mode.GPU, EvaluationJob.Mode.INTERPRETER):
        job.mode = str(mode)
        return ["mode"]
    return []


# Each takes the locked, claimed job, the report (of its kind) and the report's time.
_REPORT_HANDLERS: dict[EventKind, Callable[[EvaluationJob, Any, datetime], list[str]]] = {
    EventKind.STARTED: _on_started,
    EventKind.PROGRESS: _on_progress,
    EventKind.HEARTBEAT: _on_heartbeat,
    EventKind.RESULT: _on_result,
    EventKind.FAILED: _on_failed,
}


def _stop_on_commit(job_id: int, attempt: int, run: str) -> None:
    message = stop_message(job_id=job_id, up_to_attempt=attempt, run=run)
    transaction.on_commit(lambda: publish_stop(current_app, message), robust=True)


def _job_ended(submission_id: int) -> None:
    """A job of the submission ended or went back to the queue: its environment is rewritten
    from the jobs' latest attempts now, in this transaction (boards read it), and its rescore
    asked for once the transaction commits."""
    submission_environment_update(submission_id)
    rescore_on_commit(submission_id)


def rescore_on_commit(submission_id: int) -> None:
    """Once this transaction commits, score the submission afresh: after any job of it ended
    or went back to the queue (boards rank whole evaluations only)."""
    # By task name: scores live in the leaderboard app, which sits above this one.
    transaction.on_commit(lambda: current_app.send_task(
        RESCORE_TASK, args=[submission_id], queue=RESULTS_QUEUE))
