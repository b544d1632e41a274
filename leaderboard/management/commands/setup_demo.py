"""python manage.py setup_demo: the starter and fixture releases, a demo team and its user
(idempotent). The starter release is the benchmark; the fixture release is the small one the
sample candidates in evaluation/sample_candidates/ are written for, with their recorded H200
results in each DSL on its boards (leaderboard/demo.py; --no-recorded leaves them out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from evaluation.catalog.importing import release_import
from leaderboard.demo import load_recorded_results
from leaderboard.services import weight_set_from_release
from portal.accounts.models import Membership, Team

RELEASES = Path(settings.BASE_DIR) / "evaluation" / "releases"
STARTER, FIXTURE = RELEASES / "atrex-starter", RELEASES / "atrex-fixture"
DEMO_USER, DEMO_PASSWORD = "demo", "demo-password"


class Command(BaseCommand):
    help = "Load the starter and fixture releases and a demo team for the embedded default."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--no-recorded", action="store_true",
                            help="leave the recorded H200 results of the sample candidates out")

    def handle(self, *args: Any, **options: Any) -> None:
        for path in (STARTER, FIXTURE):
            with transaction.atomic():
                summary = release_import(path=path)
                weight_set_from_release(summary.release)
            self.stdout.write(f"release: {summary.release} ({summary.operators} operators, "
                              f"{summary.shapes} shapes)")
            if path == FIXTURE and not options["no_recorded"]:
                teams = load_recorded_results(summary.release)
                if teams:
                    self.stdout.write(f"recorded H200 results on its boards: {', '.join(teams)}")
        team, _ = Team.objects.get_or_create(slug="demo", defaults={"name": "Demo team"})
        user, created = get_user_model().objects.get_or_create(username=DEMO_USER)
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        Membership.objects.get_or_create(team=team, user=user)
        self.stdout.write(f"sign in at http://127.0.0.1:8000/accounts/login/ as "
                          f"{DEMO_USER} / {DEMO_PASSWORD} (team '{team.name}')")
