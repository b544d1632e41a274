"""Web-side task: the results consumer (queue `results`)."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from evaluation.catalog import capability
from evaluation.protocol import RECORD_EVENT_TASK, RECORD_NCU_TASK, RECORD_WORKER_TASK
from submissions import jobs, ncu, webhooks


# A lost database connection (restart, failover, a killed backend) fails only the report in
# flight: it is tried again on a fresh connection, so no report is lost.
@shared_task(name=RECORD_EVENT_TASK, acks_late=True,
             autoretry_for=(OperationalError, InterfaceError), retry_backoff=1,
             retry_backoff_max=30, max_retries=12)
def record_event(kind: str, payload: dict[str, Any]) -> None:
    jobs.record_event(kind, payload)


@shared_task(name=RECORD_NCU_TASK, acks_late=True,
             autoretry_for=(OperationalError, InterfaceError), retry_backoff=1,
             retry_backoff_max=30, max_retries=12)
def record_ncu_profile(payload: dict[str, Any]) -> None:
    ncu.record_ncu_profile(payload)


@shared_task(name=jobs.RELEASE_TASK, bind=True, acks_late=True,
             autoretry_for=(OperationalError, InterfaceError), retry_backoff=1,
             retry_backoff_max=30, max_retries=12)
def release_job(self: Task[Any, Any], job_id: int) -> None:
    """A held job's hidden tier at its release time (sent with a countdown; the sweep
    releases any this misses). Early, by a clock's skew: tried again when it is due."""
    if not jobs.job_release(job_id):
        left = jobs.release_wait_s(job_id)
        if left is not None:
            raise self.retry(countdown=left, max_retries=None)


@shared_task(name="submissions.sweep_jobs")
def sweep_jobs() -> dict[str, list[int]]:
    """Run by Celery beat (CELERY_BEAT_SCHEDULE) on the web side."""
    report = jobs.jobs_sweep()
    return {"requeued": report.requeued, "failed": report.failed}


@shared_task(name=webhooks.TEST_DELIVER_TASK)
def deliver_webhook_test(team_id: int, body: str, delivery: str) -> None:
    """The team page's test ping (queue `results`): tried once, never raises."""
    webhooks.deliver_test(team_id, body, delivery)


@shared_task(name=webhooks.DELIVER_TASK, bind=True, max_retries=None)
def deliver_webhook(self: Task[Any, Any], submission_id: int, body: str, delivery: str) -> None:
    """POST a submission's end to its team's webhook (queue `results`, sent after commit).

    Tried again after a growing delay while the receiver cannot be reached, times out or
    answers 5xx, 408 or 429, up to ATREX_WEBHOOK_RETRIES times; then, or at once for any
    other answer, the failure is logged and shown on the team page. It never raises: a
    receiver's trouble is the receiver's.
    """
    try:
        webhooks.deliver(submission_id, body, delivery)
    except webhooks.DeliveryFailed as exc:
        attempts = self.request.retries + 1
        if exc.retry and self.request.retries < settings.ATREX_WEBHOOK_RETRIES:
            raise self.retry(countdown=webhooks.retry_delay(self.request.retries)) from None
        webhooks.delivery_failed(submission_id, delivery, exc, attempts)


@shared_task(name=RECORD_WORKER_TASK, acks_late=True,
             autoretry_for=(OperationalError, InterfaceError), retry_backoff=1,
             retry_backoff_max=30, max_retries=12)
def record_worker(payload: dict[str, Any]) -> None:
    """A GPU worker's announcement: what it evaluates (evaluation/catalog/capability.py)."""
    capability.worker_announced(payload)
