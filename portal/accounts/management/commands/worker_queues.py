"""python manage.py worker_queues: the queues an all-in-one worker consumes (comma-separated)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from evaluation.models import HardwareProfile
from evaluation.tasks import RESULTS_QUEUE


class Command(BaseCommand):
    help = "Print eval.<hardware> for every profile, and the results queue."

    def handle(self, *args: Any, **options: Any) -> None:
        queues = [profile.queue for profile in HardwareProfile.objects.order_by("name")]
        self.stdout.write(",".join([*queues, RESULTS_QUEUE]))
