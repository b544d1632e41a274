"""python manage.py evaluate_baselines NAME --hardware SKU: the reference baselines.

Submits the release's own references, eager ("PyTorch reference") and under torch.compile
("torch.compile reference"), as two baseline submissions to the GPU workers of SKU. When
their jobs finish they appear beside the boards of that release and hardware, unranked.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.models import HardwareProfile, Release
from submissions.services import baseline_submissions_create


class Command(BaseCommand):
    help = "Evaluate a release's references (eager and torch.compile) as baseline submissions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="release name (newest version)")
        parser.add_argument("--hardware", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        release = Release.objects.filter(name=options["name"]).order_by("-version").first()
        if release is None:
            raise CommandError(f"no imported release named {options['name']!r}")
        hardware = HardwareProfile.objects.filter(name=options["hardware"]).first()
        if hardware is None:
            known = ", ".join(HardwareProfile.objects.values_list("name", flat=True))
            raise CommandError(f"no hardware profile {options['hardware']!r} (known: {known})")
        for submission in baseline_submissions_create(release=release, hardware=hardware):
            jobs = submission.candidates.count()
            self.stdout.write(f"submission #{submission.pk}: {submission.get_baseline_display()}"
                              f", {jobs} operator jobs queued on {hardware.queue}")
