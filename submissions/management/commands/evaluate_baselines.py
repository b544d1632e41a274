"""python manage.py evaluate_baselines NAME --hardware SKU [--kinds pytorch,torch_compile]:
the reference baselines.

Submits the release's own references, eager ("PyTorch reference") and under torch.compile
("torch.compile reference"), as baseline submissions to the GPU workers of SKU (both, or
the kinds named). When their jobs finish they appear beside the boards of that release and
hardware, unranked.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.catalog.models import HardwareProfile, Release
from submissions.models import Submission
from submissions.services import baseline_submissions_create

KINDS = [kind for kind in Submission.Baseline.values if kind]  # "" marks a team's submission


class Command(BaseCommand):
    help = "Evaluate a release's references (eager and torch.compile) as baseline submissions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="release name (newest version)")
        parser.add_argument("--hardware", required=True)
        parser.add_argument("--kinds", default=",".join(KINDS),
                            help=f"comma-separated baselines (default: {','.join(KINDS)})")

    def handle(self, *args: Any, **options: Any) -> None:
        release = Release.objects.filter(name=options["name"]).order_by("-version").first()
        if release is None:
            raise CommandError(f"no imported release named {options['name']!r}")
        hardware = HardwareProfile.objects.filter(name=options["hardware"]).first()
        if hardware is None:
            known = ", ".join(HardwareProfile.objects.values_list("name", flat=True))
            raise CommandError(f"no hardware profile {options['hardware']!r} (known: {known}); "
                               "`manage.py import_hardware` stores the project's profiles "
                               "(H200, H100, H20, MI300X)")
        kinds = [k.strip() for k in options["kinds"].split(",") if k.strip()]
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown or not kinds:
            raise CommandError(f"unknown baselines {unknown} (known: {', '.join(KINDS)})")
        for submission in baseline_submissions_create(release=release, hardware=hardware,
                                                      kinds=kinds):
            jobs = submission.candidates.count()
            self.stdout.write(f"submission #{submission.pk}: {submission.get_baseline_display()}"
                              f", {jobs} operator jobs queued on {hardware.queue}")
