"""Aggregate board: page (sortable with htmx), JSON and CSV with the same numbers."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.db.models import F
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from evaluation.models import HardwareProfile, Release
from leaderboard.scoring import WeightError
from leaderboard.selectors import (
    COLUMNS,
    NUMBER_COLUMNS,
    board_rows,
    operator_board,
    rank_changes,
    rows_as_csv,
    weight_set_for,
)
from leaderboard.services import arithmetic_intensity, weight_set_activate, weight_set_create
from submissions.models import ShapeResult
from submissions.selectors import submission_visible


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
        "operators": release.operators.order_by("name").values_list("name", flat=True),
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


def _operator_board(request: HttpRequest, pk: int, hardware: str,
                    operator: str) -> dict[str, Any]:
    """What the operator board's page and its JSON both show."""
    release = get_object_or_404(Release, pk=pk)
    profile = get_object_or_404(HardwareProfile, name=hardware)
    get_object_or_404(release.operators, name=operator)
    weight_set = weight_set_for(release, request.GET.get("weights"))
    return {"release": release, "hardware": profile, "weight_set": weight_set,
            **operator_board(release=release, hardware=profile, weight_set=weight_set,
                             operator=operator)}


def operator_board_export(request: HttpRequest, pk: int, hardware: str,
                          operator: str) -> JsonResponse:
    data = _operator_board(request, pk, hardware, operator)
    release, profile, weight_set = data.pop("release"), data.pop("hardware"), data.pop("weight_set")
    return JsonResponse({"release": str(release), "hardware": profile.name,
                         "weights_version": weight_set.version, **data})


def rank_changes_export(request: HttpRequest, pk: int, hardware: str) -> JsonResponse:
    """What changed between two weight versions (?from=A&to=B), as rank moves."""
    release = get_object_or_404(Release, pk=pk)
    profile = get_object_or_404(HardwareProfile, name=hardware)
    before = weight_set_for(release, request.GET.get("from"))
    after = weight_set_for(release, request.GET.get("to"))
    return JsonResponse({"release": str(release), "hardware": profile.name,
                         "from": before.version, "to": after.version,
                         "rows": rank_changes(release=release, hardware=profile, before=before,
                                              after=after)})


@staff_member_required
@require_http_methods(["GET", "POST"])
def weights_page(request: HttpRequest, pk: int) -> HttpResponse:
    """Admins: weight versions of a release; create one (form or importance file), activate."""
    release = get_object_or_404(Release, pk=pk)
    error = None
    if request.method == "POST":
        try:
            if "activate" in request.POST:
                weight_set = get_object_or_404(release.weight_sets,
                                               version=request.POST["activate"])
                weight_set_activate(weight_set=weight_set, actor=request.user)
            else:
                weights, source = _posted_weights(request)
                weight_set_create(release=release, weights=weights, source=source,
                                  author=request.user, note=request.POST.get("note", "")[:300])
            return redirect("weights", pk=release.pk)
        except (WeightError, ValueError) as exc:
            error = str(exc)
    return render(request, "leaderboard/weights.html", {
        "release": release, "weight_sets": release.weight_sets.order_by("-version"),
        "operators": release.operators.order_by("name"), "error": error},
        status=400 if error else 200)


def _posted_weights(request: HttpRequest) -> tuple[dict[str, float], str]:
    upload = request.FILES.get("importance")
    if upload is not None:
        try:
            doc = json.loads(upload.read().decode("utf-8"))
            entries = doc["operators"]
            return ({op: float(e["importance_score"]) for op, e in entries.items()},
                    "importance_file")
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError,
                ValueError) as exc:
            raise ValueError("the file is not an operator_importance.json "
                             f"({type(exc).__name__}: {exc})") from None
    weights = {}
    for key, value in request.POST.items():
        if key.startswith("w_") and value.strip():
            weights[key[2:]] = float(value)
    return weights, "manual"


def submission_charts(request: HttpRequest, pk: int) -> JsonResponse:
    """Data for the submission page's charts: roofline points and per-operator scores."""
    submission = submission_visible(request, pk)
    hardware = submission.hardware
    results = (ShapeResult.objects
               .filter(job__candidate__submission=submission, attempt=F("job__attempts"))
               .select_related("shape__operator__hidden").order_by("shape__operator__name",
                                                                    "shape__position"))
    points = [{"operator": r.shape.operator.name, "shape": r.shape.shape_id,
               "intensity": arithmetic_intensity(r.shape.operator, r.shape.shape_id),
               "attainment": r.attainment, "verdict": r.verdict} for r in results]
    active = submission.release.weight_sets.filter(active=True).first()
    score = submission.scores.filter(weight_set=active).first() if active else None
    return JsonResponse({
        "ridge_bf16": hardware.peak_flops.get("bf16_tc", 0) / hardware.hbm_bytes_per_s,
        "hardware": hardware.name,
        "points": [p for p in points if p["intensity"] is not None],
        "by_operator": score.by_operator if score else {},
        "aggregate": score.aggregate if score else None,
    })


def operator_board_page(request: HttpRequest, pk: int, hardware: str,
                        operator: str) -> HttpResponse:
    return render(request, "leaderboard/operator_board.html",
                  _operator_board(request, pk, hardware, operator))
