"""python manage.py release_dsls RELEASE_ID [--set triton,cute --note TEXT [--actor USERNAME]]

Without --set: the DSLs submissions to the release may declare (the first is the upload
default). With --set: that list instead, in that order, written to the audit log; any DSL
the evaluator knows, also one it has no adapter for yet (said when set). Existing
submissions keep the DSL they declared.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from evaluation.catalog.models import Release
from evaluation.harness.dsl import KNOWN_DSLS, SUPPORTED_DSLS
from portal.audit.models import audit


class Command(BaseCommand):
    help = "Show or set the DSLs a release accepts (audited)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("release", type=int, help="the release's id")
        parser.add_argument("--set", default=None, metavar="DSL,DSL",
                            help=f"the accepted DSLs, the default first (known: "
                                 f"{', '.join(KNOWN_DSLS)})")
        parser.add_argument("--note", default="", help="why (required with --set)")
        parser.add_argument("--actor", default=None, help="username the audit log names")

    def handle(self, *args: Any, **options: Any) -> None:
        release = Release.objects.filter(pk=options["release"]).first()
        if release is None:
            raise CommandError(f"no release with id {options['release']}")
        if options["set"] is None:
            self.stdout.write(f"{release}: accepts {', '.join(release.accepted_dsls())}")
            return
        chosen = [d.strip() for d in options["set"].split(",") if d.strip()]
        unknown = [d for d in chosen if d not in KNOWN_DSLS]
        if not chosen or unknown or len(set(chosen)) != len(chosen):
            raise CommandError(f"--set {options['set']!r}: name each DSL once, from "
                               f"{', '.join(KNOWN_DSLS)}")
        if not options["note"].strip():
            raise CommandError("--note is required: say why the accepted DSLs change")
        actor = None
        if options["actor"]:
            actor = get_user_model().objects.filter(username=options["actor"]).first()
            if actor is None:
                raise CommandError(f"no user named {options['actor']!r}")
        with transaction.atomic():
            before = list(release.accepted_dsls())
            release.dsls = chosen
            release.save(update_fields=["dsls"])
            audit(actor=actor, action="release.dsls", target=f"release:{release}",
                  before={"dsls": before}, after={"dsls": chosen, "note": options["note"]})
        self.stdout.write(f"{release}: accepts {', '.join(chosen)} (was {', '.join(before)})")
        for name in chosen:
            if name not in SUPPORTED_DSLS:
                self.stdout.write(f"note: this evaluator has no adapter for {name} yet: its "
                                  "jobs fail with that reason until a worker has one")
