"""The GPU task: a thin shell around `evaluation.jobs.run_job_spec`.

It runs on a GPU host that consumes `eval.<hardware>` and reaches the broker only: results
go back as messages on the results queue, never through the database.
"""

from __future__ import annotations

from typing import Any

from celery import current_app, shared_task

from evaluation.jobs import run_job_spec

RESULTS_QUEUE = "results"
RECORD_EVENT_TASK = "submissions.record_event"


@shared_task(name="evaluation.evaluate_job", acks_late=True, reject_on_worker_lost=True)
def evaluate_job(spec: dict[str, Any]) -> None:
    def publish(kind: str, payload: dict[str, Any]) -> None:
        current_app.send_task(RECORD_EVENT_TASK, args=[kind, payload], queue=RESULTS_QUEUE)

    run_job_spec(spec, publish)
