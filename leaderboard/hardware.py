"""Changing a hardware profile: a new version, stored results rescaled, boards rescored.

A profile's figures (peaks, HBM bandwidth, launch floor) are the SOL basis of every stored
result on that hardware; changing them in place would leave boards mixing two bases. So a
change is one transaction: the new version, every result's SOL and attainment from its
stored time, the summaries and scores of every release with submissions on the hardware,
and the audit entry. No kernel is run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from evaluation.catalog.importing import (
    HardwareProfileError,
    hardware_figures_check,
    hardware_profile_version_create,
    peak_paths_in_use,
)
from evaluation.catalog.models import HardwareProfile, HardwareProfileVersion, Release
from evaluation.harness.release import HardwareSpec, ReleaseError
from leaderboard.services import rescore_weight_set, summaries_rebuild
from portal import derived_cache
from portal.audit.models import audit
from submissions.models import Submission
from submissions.sol import shape_results_rescale


@dataclass(frozen=True)
class HardwareUpdate:
    version: HardwareProfileVersion
    results: int  # stored results on the hardware, all rescaled
    changed: int  # of them, those whose SOL or attainment changed
    submissions: int
    releases: list[str]


def hardware_profile_update(*, profile: HardwareProfile, peak_flops: Mapping[str, Any],
                            hbm_bytes_per_s: Any, launch_floor_s: Any, arch: Any, actor: Any,
                            note: str, source: Mapping[str, Any] | None = None) -> HardwareUpdate:
    """New figures for `profile`, as its next version, applied to everything stored.

    Raises HardwareProfileError, with nothing changed, for invalid figures (a peak or the
    bandwidth not positive, a negative launch floor, an unknown precision path), for figures
    equal to the current ones, and for dropping a precision path a stored roofline needs.
    `source` defaults to the current version's. Locks the profile row: updates of one
    profile run one after the other.
    """
    figures = hardware_figures_check(name=profile.name, peak_flops=peak_flops,
                                     hbm_bytes_per_s=hbm_bytes_per_s,
                                     launch_floor_s=launch_floor_s, arch=arch)
    with transaction.atomic():
        locked = HardwareProfile.objects.select_for_update().get(pk=profile.pk)
        before = _figures(locked)
        if not _differs(locked, figures):
            raise HardwareProfileError(f"{locked.name}: these are the figures of its current "
                                       f"version v{locked.version}; nothing to change")
        _check_no_path_in_use_dropped(locked, figures.peak_flops)
        version = hardware_profile_version_create(
            profile=locked, figures=figures, author=actor, note=note,
            source=locked.source if source is None else source)
        try:
            rescaled = shape_results_rescale(hardware=locked)
        except ReleaseError as exc:
            raise HardwareProfileError(f"{locked.name}: {exc}") from exc
        releases = list(Release.objects.filter(submissions__hardware=locked).distinct())
        for release in releases:
            summaries_rebuild(release, Submission.objects.filter(release=release, hardware=locked)
                              .select_related("hardware"))
            for weight_set in release.weight_sets.all():
                rescore_weight_set(weight_set)
        audit(actor=actor, action="hardware.update", target=f"hardware:{locked.name}",
              before=before, after={**_figures(locked), "note": note,
                                    "results_rescaled": rescaled.results,
                                    "submissions_rescored": len(rescaled.submissions)})
        derived_cache.changed(derived_cache.BOARDS)  # ridge points and regimes too
    profile.refresh_from_db()
    return HardwareUpdate(version=version, results=rescaled.results, changed=rescaled.changed,
                          submissions=len(rescaled.submissions),
                          releases=[str(r) for r in releases])


def _figures(profile: HardwareProfile) -> dict[str, Any]:
    return {"version": profile.version, "arch": profile.arch, "peak_flops": profile.peak_flops,
            "hbm_bytes_per_s": profile.hbm_bytes_per_s, "launch_floor_s": profile.launch_floor_s}


def _differs(profile: HardwareProfile, figures: HardwareSpec) -> bool:
    current = profile.as_spec()
    return ((current.arch or None, {k: float(v) for k, v in current.peak_flops.items()},
             float(current.hbm_bytes_per_s), float(current.launch_floor_s))
            != (figures.arch, dict(figures.peak_flops), figures.hbm_bytes_per_s,
                figures.launch_floor_s))


def _check_no_path_in_use_dropped(profile: HardwareProfile, peak_flops: Mapping[str, float]) -> None:
    dropped = set(profile.peak_flops) - set(peak_flops)
    in_use = peak_paths_in_use()
    for path in sorted(dropped & set(in_use)):
        raise HardwareProfileError(f"{profile.name}: p_peak.{path}: cannot be dropped, the W of "
                                   f"{in_use[path]} needs it")
