"""python manage.py rescore [NAME ...]: every stored score of the named releases (default:
all) combined again from the stored summaries under each weight version. No kernel runs.

For after an upgrade that changes how scores are combined (issue 41: the regime and phase
boards span the release's scored tier, not the deployment's shape filter). With
`--rebuild-summaries`, the summaries are first rebuilt from the stored shape results, for an
upgrade that changes what a summary holds (issue 42: each hidden shape beside its public
sibling; until then a summary stored before it keeps the medians' generalisation rule)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from evaluation.catalog.models import Release
from leaderboard.models import WeightSet
from leaderboard.services import rescore_weight_set, summaries_rebuild


class Command(BaseCommand):
    help = "Combine every stored score again (no kernel runs)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("names", nargs="*", help="release names (default: every release)")
        parser.add_argument("--rebuild-summaries", action="store_true",
                            help="rebuild the summaries from the shape results first")

    def handle(self, *args: Any, **options: Any) -> None:
        names = options["names"]
        unknown = sorted(set(names) - set(Release.objects.values_list("name", flat=True)))
        if unknown:
            raise CommandError(f"no release named {', '.join(unknown)}")
        sets = WeightSet.objects.select_related("release").order_by("release__name", "version")
        if names:
            sets = sets.filter(release__name__in=names)
        if options["rebuild_summaries"]:
            for release in Release.objects.filter(pk__in=sets.values("release")):
                summaries = summaries_rebuild(release)
                self.stdout.write(f"{release}: {len(summaries)} summaries rebuilt")
        for weight_set in sets:
            count = rescore_weight_set(weight_set)
            self.stdout.write(f"{weight_set.release} weights v{weight_set.version}: "
                              f"{count} submissions rescored")
