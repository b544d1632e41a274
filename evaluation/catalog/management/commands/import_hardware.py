"""python manage.py import_hardware: the project's hardware profiles, where the portal lacks them.

A release in the upstream layout brings only its own SKUs (the public Atrex-Bench: XPU-A and
XPU-B). This stores the project's profiles (evaluation/hardware: H200, H100, H20, MI300X) as
version 1 wherever no profile of that name exists; a stored profile is never changed (as by
an import): where the project's YAML differs, the differences are printed, and
`manage.py hardware_profile` applies them as a new version.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from evaluation.catalog.importing import project_hardware_import


class Command(BaseCommand):
    help = "Store the project's hardware profiles (H200, H100, H20, MI300X) the portal lacks."

    def handle(self, *args: Any, **options: Any) -> None:
        for entry in project_hardware_import():
            profile = entry.profile
            if entry.created:
                self.stdout.write(f"{profile.name}: stored as v1 (queue {profile.queue})")
                continue
            self.stdout.write(f"{profile.name}: already stored (v{profile.version}), unchanged")
            for difference in entry.differences:
                self.stdout.write(f"  the project's YAML differs: {difference}")
