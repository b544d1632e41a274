"""python manage.py check_release NAME [--release-version N] [--device-report FILE ...]:
check an imported release end to end.

Writes the release back out of the catalog (public and hidden files, as imported) and runs
the harness's release check on it: the loader's checks, input keys against
`Model.forward` on every shape, SOL on every hardware profile in the portal, and the
references of the dev tier on this machine's CPU. The web tier has no GPU: whether every
shape's reference runs on a GPU at all comes from a device report made on a GPU host
(`python -m evaluation check-release --release DIR --device cuda --json FILE`); a shape
whose reference cannot run there is a problem, one that may not fit an evaluation a warning.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.catalog.models import HardwareProfile, Release, Shape
from evaluation.harness.release import HIDDEN_SHAPES_FILE
from evaluation.harness.release_check import (
    DeviceCheck,
    OperatorCheck,
    check_release,
    device_findings,
)


class Command(BaseCommand):
    help = "Check every operator and shape of an imported release; run its dev-tier references."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--release-version", type=int, default=None, help="default: the newest")
        parser.add_argument("--device-report", type=Path, action="append", default=[],
                            help="a GPU host's device report of this release (repeatable)")

    def handle(self, *args: Any, **options: Any) -> None:
        releases = Release.objects.filter(name=options["name"]).order_by("-version")
        if not releases.exists():
            raise CommandError(f"no imported release named {options['name']!r}")
        wanted = options["release_version"]
        release = releases.first() if wanted is None else releases.filter(version=wanted).first()
        if release is None:
            versions = ", ".join(str(v) for v in sorted(releases.values_list("version", flat=True)))
            raise CommandError(f"release {options['name']!r} has no version {wanted} "
                               f"(imported versions: {versions})")
        reports = [self._device_report(path, release) for path in options["device_report"]]
        hardware = {h.name: h.as_spec() for h in HardwareProfile.objects.all()}
        self.stdout.write(f"checking {release}: {release.operators.count()} operators, "
                          f"hardware {', '.join(sorted(hardware))}")
        with tempfile.TemporaryDirectory(prefix="atrex-check-") as tmp:
            root = Path(tmp) / release.name
            write_release(release, root)
            result = check_release(root, hardware, progress=self._line)
        if result.release_error:
            raise CommandError(f"{release} does not load: {result.release_error}")
        problems = [p for op in result.operators for p in op.problems]
        for report in reports:
            device_problems, warnings = device_findings(report)
            runs = len(report.shapes) - len(report.cannot_run())
            self.stdout.write(f"  device report, {report.device}: {runs} of "
                              f"{len(report.shapes)} shapes' references run")
            for line in warnings:
                self.stdout.write(f"    warning: {line}")
            for line in device_problems:
                self.stdout.write(f"    problem: {line}")
            problems += device_problems
        shapes = sum(op.shapes for op in result.operators)
        dev = sum(op.dev_shapes_run for op in result.operators)
        self.stdout.write(f"{len(result.operators)} operators, {shapes} shapes, "
                          f"{dev} dev-tier references run, {len(problems)} problems")
        if problems:
            raise CommandError("release check failed:\n" + "\n".join(problems))

    def _device_report(self, path: Path, release: Release) -> DeviceCheck:
        """A device report, refused unless it covers exactly this release's shapes."""
        try:
            report = DeviceCheck.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise CommandError(f"{path}: {exc}") from exc
        expected = set(Shape.objects.filter(operator__release=release)
                       .values_list("operator__name", "shape_id"))
        reported = {(s.operator, s.shape_id) for s in report.shapes}
        if reported != expected:
            missing, extra = sorted(expected - reported), sorted(reported - expected)
            raise CommandError(f"{path}: the report is not of {release}: "
                               f"{len(missing)} of its shapes missing {missing[:3]}, "
                               f"{len(extra)} shapes it does not have {extra[:3]}")
        return report

    def _line(self, op: OperatorCheck) -> None:
        sol = (f"SOL {op.sol_range_us[0]:.3g}–{op.sol_range_us[1]:.3g} µs"
               if op.sol_range_us else "SOL –")
        status = "ok" if not op.problems else f"{len(op.problems)} problems"
        self.stdout.write(f"  {op.name:<32} {op.shapes:>3} shapes, {op.dev_shapes_run} dev run, "
                          f"{sol}, {op.seconds:.2f} s: {status}")
        for note in op.notes:
            self.stdout.write(f"    note: {note}")
        for problem in op.problems:
            self.stdout.write(f"    problem: {problem}")


def write_release(release: Release, root: Path) -> None:
    """The release's files as they were imported (hardware comes from the portal's rows)."""
    data = root / "data"
    for op in release.operators.select_related("hidden"):
        directory = data / op.name
        directory.mkdir(parents=True)
        (directory / "reference.py").write_text(op.reference_py, encoding="utf-8")
        (directory / "input.py").write_text(op.input_py, encoding="utf-8")
        (directory / "shapes.json").write_text(op.shapes_json, encoding="utf-8")
        hidden = getattr(op, "hidden", None)
        if hidden is not None and hidden.metadata is not None:
            (directory / "metadata.json").write_text(json.dumps(hidden.metadata))
        if hidden is not None and hidden.roofline is not None:
            (directory / "roofline.json").write_text(json.dumps(hidden.roofline))
        tier = {shape.shape_id: {"init_kwargs": shape.init_kwargs,
                                 "input_kwargs": shape.input_kwargs}
                for shape in Shape.every_tier.filter(operator=op, hidden=True)
                .order_by("position")}
        if tier:  # the hidden shape tier, as imported
            (directory / HIDDEN_SHAPES_FILE).write_text(json.dumps(tier))
    importance = getattr(release, "hidden", None)
    if importance is not None and importance.importance:
        (data / "operator_importance.json").write_text(json.dumps(
            {"metadata": {}, "operators": importance.importance}))
