"""Aggregate board: page (sortable with htmx), JSON and CSV with the same numbers."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render

from evaluation.models import HardwareProfile, Release
from leaderboard.selectors import (
    COLUMNS,
    NUMBER_COLUMNS,
    board_rows,
    operator_board,
    rows_as_csv,
    weight_set_for,
)


def _board(request: HttpRequest, pk: int, hardware: str) -> tuple[Release, HardwareProfile, object,
                                                                   list[dict[str, object]]]:
    release = get_object_or_404(Release, pk=pk)
    profile = get_object_or_404(HardwareProfile, name=hardware)
    weight_set = weight_set_for(release, request.GET.get("weights"))
    rows = board_rows(release=release, hardware=profile, weight_set=weight_set,
                      all_submissions=request.GET.get("all") == "1",
                      sort=request.GET.get("sort", "aggregate"))
    return release, profile, weight_set, rows


def board_page(request: HttpRequest, pk: int, hardware: str) -> HttpResponse:
    release, profile, weight_set, rows = _board(request, pk, hardware)
    template = "leaderboard/board.html" + ("#table" if request.htmx else "")
    response = render(request, template, {
        "release": release, "hardware": profile, "weight_set": weight_set, "rows": rows,
        "columns": COLUMNS, "number_columns": NUMBER_COLUMNS,
        "versions": release.weight_sets.order_by("-version"),
        "sort": request.GET.get("sort", "aggregate")})
    response["Vary"] = "HX-Request"
    return response


def board_export(request: HttpRequest, pk: int, hardware: str) -> HttpResponse:
    release, profile, weight_set, rows = _board(request, pk, hardware)
    if request.GET.get("format") == "csv":
        response = HttpResponse(rows_as_csv(rows), content_type="text/csv")
        response["Content-Disposition"] = (
            f'attachment; filename="{release.name}-v{release.version}-{profile.name}.csv"')
        return response
    return JsonResponse({"release": str(release), "hardware": profile.name,
                         "weights_version": getattr(weight_set, "version", None), "rows": rows})


def operator_board_export(request: HttpRequest, pk: int, hardware: str,
                          operator: str) -> JsonResponse:
    release = get_object_or_404(Release, pk=pk)
    profile = get_object_or_404(HardwareProfile, name=hardware)
    get_object_or_404(release.operators, name=operator)
    weight_set = weight_set_for(release, request.GET.get("weights"))
    data = operator_board(release=release, hardware=profile, weight_set=weight_set,
                          operator=operator)
    return JsonResponse({"release": str(release), "hardware": profile.name,
                         "weights_version": weight_set.version, **data})
