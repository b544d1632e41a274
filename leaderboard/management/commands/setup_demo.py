"""python manage.py setup_demo: the starter and fixture releases, a demo team and its user
(idempotent). The starter release is the benchmark; the fixture release is the small one the
sample candidates in evaluation/sample_candidates/ are written for.

Unless --no-recorded, their boards hold results recorded on an H200 by the project's own runs
(leaderboard/demo.py): the sample candidates in each DSL as teams on the fixture's boards,
with a second, trace-derived weight version there; the starter's reference baselines beside
its boards. --public-release PATH (or ATREX_PUBLIC_RELEASE) also imports the public
Atrex-Bench release from PATH, unchanged, with its recorded PyTorch-eager baseline.

The starter's hidden tier is drawn from a secret made at the first set-up and kept in
var/hidden-tier.secret (0600): the demo's boards show a hidden tier that no checkout holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from evaluation.catalog.hidden_tier import has_generated_tier, secret_file_ensure
from evaluation.catalog.importing import release_import
from leaderboard.demo import (
    LADDER_RESULTS,
    load_recorded_ladder,
    load_recorded_public_baseline,
    load_recorded_results,
    load_recorded_starter_baselines,
    trace_weights_for_fixture,
)
from leaderboard.models import WeightSet
from leaderboard.services import rescore_weight_set, weight_set_from_release
from portal.accounts.models import Membership, Team
from portal.env import env_str

RELEASES = Path(settings.BASE_DIR) / "evaluation" / "releases"
STARTER, FIXTURE = RELEASES / "atrex-starter", RELEASES / "atrex-fixture"
DEMO_USER, DEMO_PASSWORD = "demo", "demo-password"
HIDDEN_SECRET_FILE = "hidden-tier.secret"  # under the var folder (ATREX_VAR_DIR)


class Command(BaseCommand):
    help = "Load the starter and fixture releases and a demo team for the embedded default."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--no-recorded", action="store_true",
                            help="leave the recorded H200 results out")
        parser.add_argument("--public-release", default=env_str("ATREX_PUBLIC_RELEASE", ""),
                            help="a public Atrex-Bench release folder to import too, with its "
                                 "recorded baseline (default: $ATREX_PUBLIC_RELEASE)")

    def handle(self, *args: Any, **options: Any) -> None:
        public = Path(options["public_release"]) if options["public_release"] else None
        if public is not None and not (public / "data" / "operator_importance.json").is_file():
            raise CommandError(f"{public} is not an Atrex-Bench release folder "
                               "(no data/operator_importance.json); nothing was loaded")
        secret = secret_file_ensure(Path(settings.VAR_DIR) / HIDDEN_SECRET_FILE)
        loaded = [STARTER.name, FIXTURE.name]
        for path in (STARTER, FIXTURE):
            with transaction.atomic():
                summary = release_import(path=path, hidden_secret=secret
                                         if has_generated_tier(path) else None)
                weight_set_from_release(summary.release)
            hidden = f", {summary.hidden_shapes} hidden" if summary.hidden_shapes else ""
            self.stdout.write(f"release: {summary.release} ({summary.operators} operators, "
                              f"{summary.shapes} shapes{hidden})")
            if not options["no_recorded"]:
                self._recorded(path, summary.release)
        if public is not None:
            loaded.append(self._public(public, recorded=not options["no_recorded"]))
        # Scores stored by an older portal combine again under today's rules (boards).
        for weight_set in WeightSet.objects.filter(release__name__in=loaded):
            rescore_weight_set(weight_set)
        team, _ = Team.objects.get_or_create(slug="demo", defaults={"name": "Demo team"})
        user, created = get_user_model().objects.get_or_create(username=DEMO_USER)
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        Membership.objects.get_or_create(team=team, user=user)
        self.stdout.write(f"sign in at http://127.0.0.1:8000/accounts/login/ as "
                          f"{DEMO_USER} / {DEMO_PASSWORD} (team '{team.name}')")

    def _recorded(self, path: Path, release: Any) -> None:
        if path == STARTER:
            baselines = load_recorded_starter_baselines(release)
            if baselines:
                self.stdout.write(f"recorded H200 baselines beside its boards: "
                                  f"{', '.join(baselines)}")
            return
        teams = load_recorded_results(release)
        if teams:
            self.stdout.write(f"recorded H200 results on its boards: {', '.join(teams)}")
        weights = trace_weights_for_fixture(release)
        if weights is not None:
            self.stdout.write(f"weights v{weights.version} (active): {weights.note}")

    def _public(self, path: Path, *, recorded: bool) -> str:
        with transaction.atomic():
            summary = release_import(path=path)
            weight_set_from_release(summary.release)
        self.stdout.write(f"release: {summary.release} ({summary.operators} operators, "
                          f"{summary.shapes} shapes)")
        if recorded and load_recorded_public_baseline(summary.release):
            self.stdout.write("recorded H200 PyTorch-eager baseline beside its boards")
        if recorded:
            ladder = load_recorded_ladder(summary.release)
            if ladder is None:
                self.stdout.write(f"no recorded expert ladder: {LADDER_RESULTS} is absent "
                                  "(benchmarks/library_ladder.py writes it on a GPU host); its "
                                  "library, best-open-kernel and torch.compile rows are left out")
            elif ladder:
                self.stdout.write("recorded H200 expert ladder beside its boards: "
                                  + ", ".join(ladder))
        return summary.release.name
