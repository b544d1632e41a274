"""Web-side task: the results consumer (queue `results`)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from submissions import results


@shared_task(name="submissions.record_event", acks_late=True)
def record_event(kind: str, payload: dict[str, Any]) -> None:
    results.record_event(kind, payload)
