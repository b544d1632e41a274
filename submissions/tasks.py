"""Web-side task: the results consumer (queue `results`)."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from evaluation.protocol import RECORD_EVENT_TASK
from submissions import results, services


# A lost database connection (restart, failover, a killed backend) fails only the report in
# flight: it is tried again on a fresh connection, so no report is lost.
@shared_task(name=RECORD_EVENT_TASK, acks_late=True,
             autoretry_for=(OperationalError, InterfaceError), retry_backoff=1,
             retry_backoff_max=30, max_retries=12)
def record_event(kind: str, payload: dict[str, Any]) -> None:
    results.record_event(kind, payload)


@shared_task(name="submissions.sweep_jobs")
def sweep_jobs() -> dict[str, list[int]]:
    """Run by Celery beat (CELERY_BEAT_SCHEDULE) on the web side."""
    report = services.jobs_sweep()
    return {"requeued": report.requeued, "failed": report.failed}
