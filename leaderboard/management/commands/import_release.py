"""python manage.py import_release PATH [--name NAME] [--hidden-secret-file FILE]: catalog rows
and the release's weights.

A release whose hidden tier is generated (the starter: data/hidden_tier.json) draws it from
the secret in FILE (the admin's, mode 0600, never in the repository); the same secret gives
the same tier, so importing again changes nothing (evaluation/catalog/hidden_tier.py).

Lives in the leaderboard app because it also creates the release's first weight set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from evaluation.catalog.hidden_tier import HiddenSecretError, read_secret
from evaluation.catalog.importing import release_import
from evaluation.harness.release import ReleaseError
from leaderboard.services import weight_set_from_release


class Command(BaseCommand):
    help = "Import an Atrex-layout release folder (idempotent; changed content = new version)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--name", default=None)
        parser.add_argument("--hidden-secret-file", type=Path, default=None, metavar="FILE",
                            help="the secret the release's generated hidden tier is drawn from "
                                 "(at least 16 bytes, readable by its owner only)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            secret = (read_secret(options["hidden_secret_file"])
                      if options["hidden_secret_file"] is not None else None)
            with transaction.atomic():  # the catalog rows and the first weights, or nothing
                summary = release_import(path=options["path"], name=options["name"],
                                         hidden_secret=secret)
                weights = weight_set_from_release(summary.release)
        except (ReleaseError, HiddenSecretError) as exc:
            raise CommandError(f"release not imported: {exc}") from exc
        verb = "imported" if summary.created else "already imported, unchanged:"
        self.stdout.write(f"{verb} {summary.release} — {summary.operators} operators, "
                          f"{summary.shapes} shapes"
                          f"{f' (+{summary.hidden_shapes} hidden)' if summary.hidden_shapes else ''}"
                          f", hardware: {', '.join(summary.hardware)}")
        self.stdout.write(f"weights: v{weights.version} from the release "
                          f"({'active' if weights.active else 'inactive'})")
        heaviest = sorted(weights.weights.items(), key=lambda item: -item[1])
        self.stdout.write("  " + ", ".join(f"{op} {w:.3f}" for op, w in heaviest))
        for warning in summary.warnings:
            self.stdout.write(f"warning: {warning}")
        for name, differences in summary.hardware_differences.items():
            self.stdout.write(f"hardware {name}: the release's configs/hardware differs from the "
                              "stored profile, not applied (an import never changes a stored "
                              "profile; `manage.py hardware_profile` does):")
            for difference in differences:
                self.stdout.write(f"  {difference}")
