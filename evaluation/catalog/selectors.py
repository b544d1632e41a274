"""Reads of the public catalog. Nothing here touches the hidden tables; the hidden shape
tier is read only by the two functions that say so (jobs and scoring need it)."""

from __future__ import annotations

import fnmatch
import io
import json
import zipfile
from collections.abc import Iterable
from typing import TypedDict

from django.conf import settings
from django.db.models import Count, Max, Q, QuerySet
from django_stubs_ext import WithAnnotations

from evaluation.catalog.models import Operator, Release, Shape

# The dev tier: tiny shapes a release carries for CPU checks (Triton's interpreter). They are
# never part of the scored tier, which is what GPU deployments evaluate and boards count.
DEV_TIER = "dev-*"
# A shape filter that means the scored tier whatever ATREX_SHAPE_FILTER says (an empty glob).
SCORED_TIER = ""


def releases_public() -> QuerySet[Release]:
    # a join ignores Shape's default manager: the count says "public" itself
    return Release.objects.annotate(
        operator_count=Count("operators", distinct=True),
        shape_count=Count("operators__shapes", filter=Q(operators__shapes__hidden=False))
    ).order_by("name", "-version")


def newest_versions() -> dict[str, int]:
    """Each release name's newest version: what a bare name (`atrex-fixture`) means."""
    return dict(Release.objects.values("name").annotate(newest=Max("version"))
                .values_list("name", "newest"))


def newest_release(release: Release) -> Release | None:
    """The newest version of the release's name, when that is not `release` itself."""
    newest = Release.objects.filter(name=release.name).order_by("-version").first()
    return newest if newest is not None and newest.pk != release.pk else None


def superseded_release_ids() -> set[int]:
    """Releases with a newer version of their name."""
    newest = newest_versions()
    return {pk for pk, name, version in Release.objects.values_list("pk", "name", "version")
            if version != newest[name]}


class ShapeCount(TypedDict):
    shape_count: int


def operators_public(release: Release) -> QuerySet[WithAnnotations[Operator, ShapeCount]]:
    return (release.operators.only("id", "name", "release_id", "reference_py", "input_py",
                                   "shapes_json")
            .annotate(shape_count=Count("shapes", filter=Q(shapes__hidden=False)))
            .order_by("name"))


def public_files(operator: Operator) -> dict[str, str]:
    return {"reference.py": operator.reference_py, "input.py": operator.input_py,
            "shapes.json": operator.shapes_json}


def operator_tolerance(operator: Operator) -> dict[str, float]:
    """The tolerance the portal compares outputs with (metadata.json's, else the harness's
    default): public, so that a team's local check agrees with the portal's."""
    from evaluation.harness.release import DEFAULT_ATOL, DEFAULT_RTOL

    hidden = getattr(operator, "hidden", None)
    if hidden is None:
        return {"atol": DEFAULT_ATOL, "rtol": DEFAULT_RTOL}
    return {"atol": hidden.atol, "rtol": hidden.rtol}


def bundle_zip(release: Release, operator: Operator | None = None) -> bytes:
    """The agent-visible files, in the Atrex layout: data/<operator>/{public files}, and
    <release>/tolerances.json, each operator's correctness tolerance."""
    buffer = io.BytesIO()
    operators = [operator] if operator is not None else list(operators_public(release))
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for op in operators:
            for name, content in public_files(op).items():
                archive.writestr(f"{release.name}/data/{op.name}/{name}", content)
        archive.writestr(f"{release.name}/tolerances.json", json.dumps(
            {op.name: operator_tolerance(op) for op in operators}, indent=2) + "\n")
    return buffer.getvalue()


def evaluated_shape_ids(operator: Operator, shape_filter: str | None = None) -> list[str]:
    """The operator's public shapes a job evaluates here, in release order.

    `shape_filter` (default: the ATREX_SHAPE_FILTER setting) is a glob over shape ids; empty
    means the scored tier, every shape but the dev tier.
    """
    return _filtered(operator.shapes.order_by("position").values_list("shape_id", flat=True),
                     shape_filter)


def evaluated_hidden_shape_ids(operator: Operator, shape_filter: str | None = None) -> list[str]:
    """The operator's hidden shapes a ranked submission's job evaluates here (the same
    filter). For jobs and scoring only: never for a page, an API response or an export."""
    return _filtered(Shape.every_tier.filter(operator=operator, hidden=True)
                     .order_by("position").values_list("shape_id", flat=True), shape_filter)


def _filtered(ids: Iterable[str], shape_filter: str | None) -> list[str]:
    pattern = settings.ATREX_SHAPE_FILTER if shape_filter is None else shape_filter
    if not pattern:
        return [i for i in ids if not fnmatch.fnmatchcase(i, DEV_TIER)]
    return [i for i in ids if fnmatch.fnmatchcase(i, pattern)]


def hidden_shape_counts(release: Release) -> dict[str, int]:
    """How many hidden shapes of each operator of the release a ranked job evaluates here:
    all a page tells of them."""
    ids: dict[str, list[str]] = {}
    for operator, shape_id in (Shape.every_tier.filter(operator__release=release, hidden=True)
                               .order_by("position")
                               .values_list("operator__name", "shape_id")):
        ids.setdefault(operator, []).append(shape_id)
    counted = {operator: len(_filtered(shapes, None)) for operator, shapes in ids.items()}
    return {operator: n for operator, n in counted.items() if n}
