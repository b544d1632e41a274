"""The GPU task: a thin shell around `evaluation.worker.jobs.run_job_spec`.

It runs on a GPU host that consumes `eval.<hardware>` and reaches the broker only: results
go back as messages on the results queue, never through the database.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task

from evaluation.harness.isolation.sandbox import SandboxSettings
from evaluation.protocol import (
    EVALUATE_TASK,
    NCU_PROFILE_TASK,
    RECORD_EVENT_TASK,
    RECORD_NCU_TASK,
    RESULTS_QUEUE,
    EventKind,
    Heartbeat,
)
from evaluation.worker.app import app
from evaluation.worker.jobs import (
    new_run_id,
    run_job_spec,
    run_ncu_profile_spec,
    warm_children,
    worker_device,
)
from evaluation.worker.stop import RunStopped, StopWatch

# Reports must outlive a broker restart: keep trying for about two minutes (a report that
# never arrives leaves the job to the sweeper, which runs it again).
PUBLISH_RETRY = {"max_retries": 60, "interval_start": 0.5, "interval_step": 0.5,
                 "interval_max": 2.0}
HEARTBEAT_RETRY = {"max_retries": 1, "interval_start": 0.5}  # the next one follows soon
log = logging.getLogger(__name__)


@app.task(name=EVALUATE_TASK, bind=True, acks_late=True, reject_on_worker_lost=True)
def evaluate_job(self: Task[Any, Any], spec: dict[str, Any]) -> None:
    run, worker = new_run_id(), self.request.hostname or ""  # a worker's is always set
    beat = Heartbeat(job_id=spec["job_id"], attempt=spec["attempt"], worker=worker, run=run)
    watch = StopWatch(app, job_id=spec["job_id"], attempt=spec["attempt"], run=run,
                      heartbeat=lambda: _send(beat.kind, beat.payload(), HEARTBEAT_RETRY),
                      heartbeat_s=float(spec.get("heartbeat_s") or 0))

    def publish(kind: EventKind, payload: dict[str, Any]) -> None:
        _send(kind, payload, PUBLISH_RETRY)
        if kind is EventKind.STARTED:
            watch.beating.set()  # heartbeats after "started": it claims the job first

    with watch:
        try:
            warm = warm_children(worker_device(), str(spec.get("dsl", "triton")),
                                 SandboxSettings())
            run_job_spec(spec, publish, run=run, worker=worker, check_stop=watch.check,
                         warm=warm)
        except RunStopped as exc:
            log.warning("%s", exc)


@app.task(name=NCU_PROFILE_TASK, bind=True, acks_late=True, reject_on_worker_lost=True)
def ncu_profile(self: Task[Any, Any], spec: dict[str, Any]) -> None:
    result = run_ncu_profile_spec(spec, SandboxSettings())
    app.send_task(RECORD_NCU_TASK, args=[{"profile_id": spec.get("profile_id"),
                                          "worker": self.request.hostname, "result": result}],
                  queue=RESULTS_QUEUE, retry=True, retry_policy=PUBLISH_RETRY)


def _send(kind: EventKind, payload: dict[str, Any], retry_policy: dict[str, float]) -> None:
    app.send_task(RECORD_EVENT_TASK, args=[kind.value, payload], queue=RESULTS_QUEUE,
                  retry=True, retry_policy=retry_policy)
