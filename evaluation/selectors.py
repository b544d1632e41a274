"""Reads of the public catalog. Nothing here touches the hidden tables."""

from __future__ import annotations

import io
import zipfile

from django.db.models import Count, QuerySet

from evaluation.models import Operator, Release

PUBLIC_FILES = ("reference.py", "input.py", "shapes.json")


def releases_public() -> QuerySet[Release]:
    return Release.objects.annotate(operator_count=Count("operators", distinct=True),
                                     shape_count=Count("operators__shapes")).order_by("name",
                                                                                      "-version")


def operators_public(release: Release) -> QuerySet[Operator]:
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
