"""Public problem pages: releases, operators (agent-visible content only), bundles."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from evaluation.catalog.capability import portal_capability
from evaluation.catalog.labels import operator_labels
from evaluation.catalog.models import HardwareProfile, Operator, Release
from evaluation.catalog.selectors import (
    newest_versions,
    operators_public,
    public_files,
    releases_public,
)
from evaluation.harness.dsl import DSL_LABELS


def problems_page(request: HttpRequest) -> HttpResponse:
    """Every release: its versions told apart, which one a bare name means, and whether this
    portal's workers can evaluate it; each links its boards."""
    capability = portal_capability()
    newest = newest_versions()
    return render(request, "catalog/problems.html", {
        "releases": [(r, newest[r.name] if newest[r.name] != r.version else None,
                      capability.evaluated_shapes(r.pk)) for r in releases_public()],
        "capability": capability,
        "hardware": list(HardwareProfile.objects.order_by("name")
                         .values_list("name", flat=True))})


def release_page(request: HttpRequest, pk: int) -> HttpResponse:
    release = get_object_or_404(Release, pk=pk)
    newest = newest_versions()[release.name]
    return render(request, "catalog/release.html", {
        "release": release, "operators": operators_public(release),
        "hardware": HardwareProfile.objects.order_by("name"),
        "dsls": [(name, DSL_LABELS.get(name, name)) for name in release.accepted_dsls()],
        "newest": Release.objects.filter(name=release.name, version=newest).first()
        if newest != release.version else None})


def operator_page(request: HttpRequest, pk: int, operator: str) -> HttpResponse:
    release = get_object_or_404(Release, pk=pk)
    op = get_object_or_404(Operator, release=release, name=operator)
    # the shapes labelled as the boards split them; the public files follow, folded
    return render(request, "catalog/operator.html", {
        "release": release, "operator": op, "files": public_files(op),
        "labels": operator_labels(op)})
