"""python manage.py rescore [NAME ...]: every stored score of the named releases (default:
all) combined again from the stored summaries under each weight version. No kernel runs.

For after an upgrade that changes how scores are combined (issue 41: the regime and phase
boards span the release's scored tier, not the deployment's shape filter).

With --rebuild, each named release's summaries are first rebuilt from its stored shape
results, and with them what the boards keep (per-DSL totals, recorded sources, the operator
boards' rows), as a repair. (The upgrade that added those, issue 42, dropped the stored
summaries, migration leaderboard 0013: a plain rescore rebuilds the missing ones.) Streamed,
in batches: memory stays bounded."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from evaluation.catalog.models import Release
from leaderboard.models import WeightSet
from leaderboard.services import board_totals_recompute, rescore_weight_set, summaries_rebuild


class Command(BaseCommand):
    help = "Combine every stored score again (no kernel runs)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("names", nargs="*", help="release names (default: every release)")
        parser.add_argument("--rebuild", "--rebuild-summaries", dest="rebuild", action="store_true",
                            help="rebuild the summaries and board aggregates from the shape "
                                 "results first")

    def handle(self, *args: Any, **options: Any) -> None:
        names = options["names"]
        unknown = sorted(set(names) - set(Release.objects.values_list("name", flat=True)))
        if unknown:
            raise CommandError(f"no release named {', '.join(unknown)}")
        if options["rebuild"]:
            releases = Release.objects.order_by("name", "version")
            for release in releases.filter(name__in=names) if names else releases:
                summaries_rebuild(release)
                board_totals_recompute(release)
                self.stdout.write(f"{release}: summaries and board aggregates rebuilt")
        sets = WeightSet.objects.select_related("release").order_by("release__name", "version")
        if names:
            sets = sets.filter(release__name__in=names)
        for weight_set in sets:
            count = rescore_weight_set(weight_set)
            self.stdout.write(f"{weight_set.release} weights v{weight_set.version}: "
                              f"{count} submissions rescored")
