"""python manage.py evaluate_baselines NAME --hardware SKU [--kinds pytorch,torch_compile]:
the reference baselines.

Submits the release's own references, eager ("PyTorch reference") and under torch.compile
("torch.compile reference"), as baseline submissions to the GPU workers of SKU (both, or
the kinds named). When their jobs finish they appear beside the boards of that release and
hardware, unranked. They go to the hardware's low-priority queue: a team's job never waits
behind them.

Which release: the newest version of NAME unless --release-version names another (the command
says which it took and which others exist). Which shapes: --shapes GLOB; else the
deployment's ATREX_SHAPE_FILTER; else, where this hardware's workers last evaluated in
Triton's CPU interpreter (no GPU), the dev tier (full-size shapes take minutes each there,
and are never timed); else the scored tier.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.baselines import REFERENCE_KINDS
from evaluation.catalog.models import HardwareProfile, Release
from evaluation.catalog.selectors import DEV_TIER
from evaluation.protocol import low_priority_queue
from submissions.models import EvaluationJob
from submissions.services import baseline_submissions_create

# The kinds made from the release's own references (the open libraries' rows come from the
# expert ladder's run, leaderboard/ladder.py)
KINDS = list(REFERENCE_KINDS)


class Command(BaseCommand):
    help = "Evaluate a release's references (eager and torch.compile) as baseline submissions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="release name")
        parser.add_argument("--release-version", type=int, default=None,
                            help="the release version (default: the newest)")
        parser.add_argument("--shapes", default=None, metavar="GLOB",
                            help="shape ids to evaluate (default: see the module docstring)")
        parser.add_argument("--hardware", required=True)
        parser.add_argument("--kinds", default=",".join(KINDS),
                            help=f"comma-separated baselines (default: {','.join(KINDS)})")

    def handle(self, *args: Any, **options: Any) -> None:
        versions = list(Release.objects.filter(name=options["name"]).order_by("-version"))
        if not versions:
            raise CommandError(f"no imported release named {options['name']!r}")
        release = versions[0] if options["release_version"] is None else next(
            (r for r in versions if r.version == options["release_version"]), None)
        if release is None:
            raise CommandError(f"{options['name']} has no version {options['release_version']} "
                               f"(imported: {', '.join(f'v{r.version}' for r in versions)})")
        others = [f"v{r.version}" for r in versions if r.pk != release.pk]
        self.stdout.write(f"release: {release}" + (f" (also imported: {', '.join(others)}; "
                                                   "--release-version picks another)" if others else ""))
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
        shapes, why = shapes_to_evaluate(options["shapes"], hardware)
        self.stdout.write(f"shapes: {why}")
        for submission in baseline_submissions_create(release=release, hardware=hardware,
                                                      kinds=kinds, shape_filter=shapes):
            jobs = submission.candidates.count()
            self.stdout.write(f"submission #{submission.pk}: {submission.get_baseline_display()}"
                              f", {jobs} operator jobs queued on "
                              f"{low_priority_queue(hardware.queue)}")


def shapes_to_evaluate(asked: str | None, hardware: HardwareProfile) -> tuple[str | None, str]:
    """The shape glob for the baselines' jobs (None: the deployment's) and why."""
    if asked:
        return asked, f"{asked!r} (--shapes)"
    if settings.ATREX_SHAPE_FILTER:
        return None, f"{settings.ATREX_SHAPE_FILTER!r} (ATREX_SHAPE_FILTER)"
    last = (EvaluationJob.objects.filter(candidate__submission__hardware=hardware)
            .exclude(mode=EvaluationJob.Mode.UNKNOWN).order_by("-finished_at", "-pk")
            .values_list("mode", flat=True).first())
    if last == EvaluationJob.Mode.INTERPRETER:
        return DEV_TIER, (f"the dev tier ({DEV_TIER!r}): the workers of {hardware.name} last "
                          "evaluated in Triton's CPU interpreter, where full-size shapes take "
                          "minutes and are never timed (--shapes to choose)")
    return None, "the scored tier (every shape but the dev tier)"
