"""python manage.py worker_queues: the eval.<hardware> queues (comma-separated) a CPU or GPU
evaluation worker of this deployment consumes; the results queue has its own worker. The
worker's run-worker adds each one's .low queue after them (evaluation/protocol.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from evaluation.catalog.models import HardwareProfile


class Command(BaseCommand):
    help = "Print eval.<hardware> for every hardware profile."

    def handle(self, *args: Any, **options: Any) -> None:
        queues = [profile.queue for profile in HardwareProfile.objects.order_by("name")]
        self.stdout.write(",".join(queues))
