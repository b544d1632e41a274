"""What this portal can evaluate, from what its workers announce.

A GPU worker announces itself when it starts and every minute after
(`evaluation.protocol.Announcement`): the hardware whose queue it consumes, whether it times
kernels on a GPU or checks them in Triton's CPU interpreter, its device and the DSLs it runs.
The results consumer stores the latest announcement per worker (`worker_announced`). A
worker silent for ATREX_JOB_STALE_SECONDS (the sweeper's measure of a dead worker) no longer
counts.

`portal_capability()` combines that with the deployment's shape filter: which releases have
shapes the jobs here evaluate. The upload form and the release API mark and default to what
can run; an upload nothing here can evaluate is refused in plain words (`cannot_evaluate`).
Where no worker has announced itself (an older worker, or none started yet), nothing is
refused or hidden for it: the portal says it does not know.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from evaluation.catalog.models import EvaluationWorker, Release, Shape
from evaluation.catalog.selectors import DEV_TIER, superseded_release_ids
from evaluation.protocol import decode_announcement

GPU_MODE = "gpu"  # an announcement's mode (evaluation.harness.evaluate.GPU_MODE, without torch)


def worker_announced(payload: Mapping[str, Any], *, now: datetime | None = None) -> None:
    """Store a worker's announcement (the results consumer's RECORD_WORKER_TASK)."""
    announcement = decode_announcement(payload)
    if announcement is None:
        return
    EvaluationWorker.objects.update_or_create(name=announcement.worker, defaults={
        "hardware": list(announcement.hardware), "mode": announcement.mode,
        "device": announcement.device, "dsls": list(announcement.dsls),
        "evaluator_version": announcement.evaluator_version,
        "last_seen": now or timezone.now()})


@dataclass(frozen=True)
class EvaluableRelease:
    pk: int
    name: str
    version: int
    shapes: int  # public shapes the jobs here evaluate (the deployment's shape filter)
    superseded: bool  # a newer version of the name exists


@dataclass(frozen=True)
class Capability:
    """What the portal's live workers evaluate, and on which releases' shapes."""

    workers_known: bool  # a worker announced itself within the liveness window
    gpu: Mapping[str, str]  # hardware -> device, where a GPU worker serves it
    interpreter: tuple[str, ...]  # hardware served by CPU-interpreter workers only
    dsls: Mapping[str, tuple[str, ...]]  # hardware -> the DSLs its workers run
    shape_filter: str  # ATREX_SHAPE_FILTER ("" = the scored tier)
    releases: tuple[EvaluableRelease, ...] = field(default=())  # those with shapes here

    @property
    def dsl_names(self) -> str:
        """The DSLs some live worker runs, e.g. "gluon, triton"."""
        return ", ".join(sorted({name for names in self.dsls.values() for name in names}))

    @property
    def hardware(self) -> tuple[str, ...]:
        """Every hardware a live worker serves, GPU-served first."""
        return (*sorted(self.gpu), *self.interpreter)

    def can_rank(self, hardware: str) -> bool:
        """Whether a submission to `hardware` can be ranked: a GPU worker serves it. Unknown
        workers (none announced) are given the benefit of the doubt."""
        return not self.workers_known or hardware in self.gpu

    def serves(self, hardware: str) -> bool:
        return not self.workers_known or hardware in self.gpu or hardware in self.interpreter

    @property
    def anything_ranked(self) -> bool:
        return not self.workers_known or bool(self.gpu)

    def evaluated_shapes(self, release_pk: int) -> int:
        """How many of the release's public shapes the jobs here evaluate (0: none)."""
        return next((r.shapes for r in self.releases if r.pk == release_pk), 0)

    @property
    def current_releases(self) -> list[EvaluableRelease]:
        return [r for r in self.releases if not r.superseded]

    @property
    def tier(self) -> str:
        """Which shapes, in words."""
        if not self.shape_filter:
            return "the scored tier"
        if self.shape_filter == DEV_TIER:
            return "the dev tier"
        return f"the shapes {self.shape_filter!r} selects"

    def summary(self) -> str:
        """One plain sentence: what this portal evaluates, and how."""
        names = _and(sorted({r.name for r in self.current_releases}))
        if not self.workers_known:
            return ("No evaluation worker has reported in the last "
                    f"{settings.ATREX_JOB_STALE_SECONDS // 60} minutes: submissions wait in "
                    "their queue until one starts.")
        if not self.gpu:
            return (f"This portal has no GPU worker: it checks {names or 'no release'} on "
                    f"{self.tier} in Triton's CPU interpreter (correctness and DSL adoption; "
                    "no time is measured and nothing is ranked).")
        devices = _and([f"{hw} ({device})" for hw, device in sorted(self.gpu.items())])
        return f"GPU workers serve {devices}; they evaluate {names or 'no release'} on {self.tier}."


def portal_capability(*, now: datetime | None = None) -> Capability:
    """The live workers' announcements, with the releases that have shapes evaluated here."""
    since = (now or timezone.now()) - timedelta(seconds=settings.ATREX_JOB_STALE_SECONDS)
    gpu: dict[str, str] = {}
    interpreter: set[str] = set()
    dsls: dict[str, set[str]] = {}
    live = EvaluationWorker.objects.filter(last_seen__gte=since).order_by("name")
    for worker in live:
        for hardware in worker.hardware:
            if worker.mode == GPU_MODE:
                gpu.setdefault(hardware, worker.device)
            else:
                interpreter.add(hardware)
            dsls.setdefault(hardware, set()).update(worker.dsls)
    return Capability(workers_known=bool(live), gpu=gpu,
                      interpreter=tuple(sorted(interpreter - set(gpu))),
                      dsls={hw: tuple(sorted(names)) for hw, names in dsls.items()},
                      shape_filter=settings.ATREX_SHAPE_FILTER,
                      releases=tuple(evaluable_releases()))


def evaluable_releases() -> list[EvaluableRelease]:
    """Releases with at least one public shape the jobs here evaluate, by name and newest
    version first."""
    pattern = settings.ATREX_SHAPE_FILTER
    counts: dict[int, int] = {}
    for release_id, shape_id in Shape.objects.values_list("operator__release_id", "shape_id"):
        matched = (fnmatch.fnmatchcase(shape_id, pattern) if pattern
                   else not fnmatch.fnmatchcase(shape_id, DEV_TIER))
        counts[release_id] = counts.get(release_id, 0) + matched
    superseded = superseded_release_ids()
    return [EvaluableRelease(pk=r.pk, name=r.name, version=r.version, shapes=counts[r.pk],
                             superseded=r.pk in superseded)
            for r in Release.objects.order_by("name", "-version") if counts.get(r.pk)]


def cannot_evaluate(release: Release, *, operator: str = "",
                    capability: Capability | None = None) -> str:
    """Why `release` (or its `operator`) cannot be evaluated here, in plain words, with
    what can."""
    capability = capability or portal_capability()
    what = f"{release.name} v{release.version}" + (f" ({operator})" if operator else "")
    others = _and(sorted({r.name for r in capability.current_releases}))
    lead = ("This portal has no GPU worker: it checks" if capability.workers_known
            and not capability.gpu else "This portal evaluates")
    if not others:
        return f"{lead} no release: none has a shape in {capability.tier}."
    return f"{lead} {others} on {capability.tier}, and {what} has no shape there."


def _and(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"
