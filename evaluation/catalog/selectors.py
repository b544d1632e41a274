"""Reads of the public catalog. Nothing here touches the hidden tables."""

from __future__ import annotations

import fnmatch
import io
import zipfile
from typing import TypedDict

from django.conf import settings
from django.db.models import Count, QuerySet
from django_stubs_ext import WithAnnotations

from evaluation.catalog.models import Operator, Release

# The dev tier: tiny shapes a release carries for CPU checks (Triton's interpreter). They are
# never part of the scored tier, which is what GPU deployments evaluate and boards count.
DEV_TIER = "dev-*"


def releases_public() -> QuerySet[Release]:
    return Release.objects.annotate(operator_count=Count("operators", distinct=True),
                                     shape_count=Count("operators__shapes")).order_by("name",
                                                                                      "-version")


class ShapeCount(TypedDict):
    shape_count: int


def operators_public(release: Release) -> QuerySet[WithAnnotations[Operator, ShapeCount]]:
    return (release.operators.only("id", "name", "release_id", "reference_py", "input_py",
                                   "shapes_json")
            .annotate(shape_count=Count("shapes")).order_by("name"))


def public_files(operator: Operator) -> dict[str, str]:
    return {"reference.py": operator.reference_py, "input.py": operator.input_py,
            "shapes.json": operator.shapes_json}


def bundle_zip(release: Release, operator: Operator | None = None) -> bytes:
    """The agent-visible files, in the Atrex layout: data/<operator>/{public files}."""
    buffer = io.BytesIO()
    operators = [operator] if operator is not None else list(operators_public(release))
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for op in operators:
            for name, content in public_files(op).items():
                archive.writestr(f"{release.name}/data/{op.name}/{name}", content)
    return buffer.getvalue()


def evaluated_shape_ids(operator: Operator, shape_filter: str | None = None) -> list[str]:
    """The operator's shapes a job evaluates here, in release order.

    `shape_filter` (default: the ATREX_SHAPE_FILTER setting) is a glob over shape ids; empty
    means the scored tier, every shape but the dev tier.
    """
    pattern = settings.ATREX_SHAPE_FILTER if shape_filter is None else shape_filter
    ids = list(operator.shapes.order_by("position").values_list("shape_id", flat=True))
    if not pattern:
        return [i for i in ids if not fnmatch.fnmatchcase(i, DEV_TIER)]
    return [i for i in ids if fnmatch.fnmatchcase(i, pattern)]
