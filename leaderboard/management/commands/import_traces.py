"""python manage.py import_traces FILES... --release NAME --phase prefill|decode
[--card-hours H ...]: a new (inactive) weight set from PyTorch profiler traces.

Each FILE is a Chrome-trace JSON (gzip too) from `torch.profiler`. Its GPU time is
attributed to the release's operators by the release's mapping rules (evaluation/traces.py);
traces are combined weighted by the card-hours of the deployments they came from. The
weight set is created inactive, with its report; an admin activates it on the weights page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.catalog.models import Release
from evaluation.traces import (
    TraceError,
    combine_traces,
    parse_rules,
    read_trace,
    rules_from_metadata,
    trace_shares,
)
from leaderboard.models import WeightSet
from leaderboard.services import weight_set_create

PHASES = ("prefill", "decode")


class Command(BaseCommand):
    help = "Derive an importance weight set from profiler traces (created inactive)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path)
        parser.add_argument("--release", required=True, help="release name (newest version)")
        parser.add_argument("--phase", required=True, action="append", choices=PHASES,
                            help="once for all files, or once per file in order")
        parser.add_argument("--card-hours", type=float, action="append", default=None,
                            help="per file, in order: GPU-hours of the deployment it came "
                                 "from (default: equal)")

    def handle(self, *args: Any, **options: Any) -> None:
        files: list[Path] = options["files"]
        phases = _per_file(options["phase"], files, "--phase")
        hours = _per_file(options["card_hours"] or [1.0], files, "--card-hours")
        if any(h <= 0 for h in hours):
            raise CommandError("--card-hours must be positive")
        release = Release.objects.filter(name=options["release"]).order_by("-version").first()
        if release is None:
            raise CommandError(f"no imported release named {options['release']!r}")
        operators = list(release.operators.values_list("name", flat=True))
        try:
            stored = getattr(getattr(release, "hidden", None), "trace_rules", None)
            if stored:
                rules = parse_rules(stored, operators, "trace rules")
                source = "the release's trace_rules.json"
            else:
                rules = rules_from_metadata({op.name: getattr(op, "hidden", None) and
                                             op.hidden.metadata for op in
                                             release.operators.select_related("hidden")})
                source = "kernel names in the release's metadata.json"
            shares = [trace_shares(read_trace(path), rules, name=path.name, phase=phase,
                                   card_hours=h) for path, phase, h in zip(files, phases, hours,
                                                                           strict=True)]
            weights, report = combine_traces(shares)
        except (TraceError, OSError) as exc:
            raise CommandError(f"traces not imported: {exc}") from exc
        report["rules"] = source
        weight_set = weight_set_create(
            release=release, weights=weights, source=str(WeightSet.Source.TRACES),
            note=f"from {len(files)} trace{'s' if len(files) != 1 else ''}: "
                 + ", ".join(p.name for p in files)[:250])
        WeightSet.objects.filter(pk=weight_set.pk).update(report=report)
        self._print(release, weight_set, shares, report, operators, source)

    def _print(self, release: Release, weight_set: WeightSet, shares: list[Any],
               report: dict[str, Any], operators: list[str], source: str) -> None:
        out = self.stdout.write
        out(f"{release}: weight set v{weight_set.version} created (inactive), rules from "
            f"{source}")
        for trace in shares:
            out(f"  {trace.name}: {trace.phase}, {trace.card_hours:g} card-hours, "
                f"{trace.gpu_time_us / 1e3:.1f} ms GPU time, unattributed "
                f"{trace.unattributed:.1%}")
        phases = sorted(report["share_by_phase"])
        out(f"  {'operator':<30} {'weight':>8} " + " ".join(f"{p:>9}" for p in phases))
        for op in sorted(operators, key=lambda o: -weight_set.weights.get(o, 0.0)):
            by_phase = " ".join(f"{report['share_by_phase'][p].get(op, 0.0):>9.1%}"
                                for p in phases)
            out(f"  {op:<30} {weight_set.weights.get(op, 0.0):>8.4f} {by_phase}")
        out(f"  unattributed share of GPU time (card-hour weighted): "
            f"{report['unattributed_share']:.1%}")


def _per_file(values: list[Any], files: list[Path], option: str) -> list[Any]:
    if len(values) == 1:
        return values * len(files)
    if len(values) != len(files):
        raise CommandError(f"{option}: give it once, or once per file ({len(files)})")
    return values
