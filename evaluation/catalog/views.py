"""Public problem pages: releases, operators (agent-visible content only), bundles."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from evaluation.catalog.labels import operator_labels
from evaluation.catalog.models import HardwareProfile, Operator, Release
from evaluation.catalog.selectors import operators_public, public_files, releases_public


def home(request: HttpRequest) -> HttpResponse:
    # each release's boards, one per hardware profile, are linked from its row
    return render(request, "catalog/home.html",
                  {"releases": releases_public(),
                   "hardware": list(HardwareProfile.objects.order_by("name")
                                    .values_list("name", flat=True))})


def release_page(request: HttpRequest, pk: int) -> HttpResponse:
    release = get_object_or_404(Release, pk=pk)
    return render(request, "catalog/release.html",
                  {"release": release, "operators": operators_public(release),
                   "hardware": HardwareProfile.objects.order_by("name")})


def operator_page(request: HttpRequest, pk: int, operator: str) -> HttpResponse:
    release = get_object_or_404(Release, pk=pk)
    op = get_object_or_404(Operator, release=release, name=operator)
    # the shapes labelled as the boards split them; the public files follow, folded
    return render(request, "catalog/operator.html", {
        "release": release, "operator": op, "files": public_files(op),
        "labels": operator_labels(op)})
