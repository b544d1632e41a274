"""python manage.py hardware_profile NAME [changes --note TEXT [--actor USERNAME]]

Without changes: the profile's current figures and its versions. With changes (--peak,
--drop-peak, --hbm, --launch-floor, --arch): a new version, every stored result on that
hardware rescaled from its stored time, the boards rescored, the audit log written
(leaderboard/hardware.py). Figures not named stay as they are.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.catalog.importing import HardwareProfileError
from evaluation.catalog.models import HardwareProfile
from leaderboard.hardware import hardware_profile_update


class Command(BaseCommand):
    help = "Show a hardware profile's versions, or change its figures (a new version)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--peak", action="append", default=[], metavar="PATH=FLOPS",
                            help="set one precision path's dense peak (repeatable)")
        parser.add_argument("--drop-peak", action="append", default=[], metavar="PATH",
                            help="remove a precision path (repeatable)")
        parser.add_argument("--hbm", type=float, default=None, help="HBM bandwidth, B/s")
        parser.add_argument("--launch-floor", type=float, default=None, help="seconds")
        parser.add_argument("--arch", default=None, help="e.g. sm_90 ('' for none)")
        parser.add_argument("--note", default="", help="why (required for a change)")
        parser.add_argument("--actor", default=None, help="username the audit log names")

    def handle(self, *args: Any, **options: Any) -> None:
        profile = HardwareProfile.objects.filter(name=options["name"]).first()
        if profile is None:
            known = ", ".join(HardwareProfile.objects.order_by("name")
                              .values_list("name", flat=True)) or "none"
            raise CommandError(f"no hardware profile named {options['name']!r} (known: {known})")
        peaks = dict(profile.peak_flops)
        for item in options["peak"]:
            path, _, value = item.partition("=")
            try:
                peaks[path.strip()] = float(value)
            except ValueError:
                raise CommandError(f"--peak {item!r}: expected PATH=FLOPS, e.g. "
                                   "bf16_tc=9.89e14") from None
        for path in options["drop_peak"]:
            if path not in peaks:
                raise CommandError(f"--drop-peak {path}: {profile.name} has no such path")
            peaks.pop(path)
        changes = (options["peak"] or options["drop_peak"] or options["arch"] is not None
                   or options["hbm"] is not None or options["launch_floor"] is not None)
        if not changes:
            self._show(profile)
            return
        if not options["note"].strip():
            raise CommandError("--note is required: say why the figures change")
        try:
            update = hardware_profile_update(
                profile=profile, peak_flops=peaks,
                hbm_bytes_per_s=_given(options["hbm"], profile.hbm_bytes_per_s),
                launch_floor_s=_given(options["launch_floor"], profile.launch_floor_s),
                arch=_given(options["arch"], profile.arch), actor=self._actor(options["actor"]),
                note=options["note"].strip())
        except HardwareProfileError as exc:
            raise CommandError(f"not changed: {exc}") from exc
        self.stdout.write(f"{profile.name}: now v{update.version.version}; {update.results} "
                          f"stored results rescaled ({update.changed} changed) on "
                          f"{update.submissions} submissions; rescored: "
                          f"{', '.join(update.releases) or 'nothing'}")

    def _show(self, profile: HardwareProfile) -> None:
        self.stdout.write(f"{profile.name} v{profile.version}: arch {profile.arch or 'none'}, "
                          f"HBM {profile.hbm_bytes_per_s:.6g} B/s, launch floor "
                          f"{profile.launch_floor_s:.3g} s")
        for path, flops in sorted(profile.peak_flops.items()):
            self.stdout.write(f"  p_peak.{path}: {flops:.6g} FLOP/s")
        for version in profile.versions.select_related("author"):
            self.stdout.write(f"  v{version.version} {version.created_at:%Y-%m-%d %H:%M} "
                              f"{version.author or '-'}: {version.note}")

    def _actor(self, username: str | None) -> Any:
        if username is None:
            return None
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"--actor {username}: no such user")
        return user


def _given(value: Any, current: Any) -> Any:
    return current if value is None else value
