"""Team pages for iterating: an operator's history of scores, and two submissions compared."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import urlencode

from evaluation.catalog.models import HardwareProfile, Operator, Release
from leaderboard.iteration import history_targets, operator_history, submission_compare
from portal.accounts.viewer import ViewerRequest
from submissions.services import MAX_BIG_INTEGER
from submissions.visibility import visible_submission


def operator_or_404(name: str) -> str:
    """An operator name some release has (NUL would be a 500 in PostgreSQL's lookup)."""
    if "\x00" in name or len(name) > 100 or not Operator.objects.filter(name=name).exists():
        raise Http404(f"no operator named {name!r}")
    return name


def history_filters(release: int | None, hardware: str | None) -> dict[str, Any]:
    """The optional release (by id) and hardware (by name) a history is narrowed to."""
    filters: dict[str, Any] = {}
    if release is not None:
        filters["release"] = get_object_or_404(Release, pk=release)
    if hardware:
        if "\x00" in hardware:
            raise Http404("no such hardware profile")
        filters["hardware"] = get_object_or_404(HardwareProfile, name=hardware)
    return filters


def _release_param(value: str | None) -> int | None:
    if not value:
        return None
    # Length first: int() of thousands of digits is slow.
    if not (value.isascii() and value.isdigit() and len(value) <= len(str(MAX_BIG_INTEGER))) \
            or int(value) > MAX_BIG_INTEGER:
        raise BadRequest(f"release: expected a number from 0 to {MAX_BIG_INTEGER}")
    return int(value)


@login_required
def operator_history_page(request: ViewerRequest, operator: str) -> HttpResponse:
    team = request.viewer.team
    if team is None:
        raise Http404("you are not a member of any team")
    name = operator_or_404(operator)
    release, hardware = _release_param(request.GET.get("release")), request.GET.get("hardware")
    history = operator_history(team=team, operator=name, **history_filters(release, hardware))
    query = {k: v for k, v in (("release", release), ("hardware", hardware)) if v}
    api_url = reverse("api-operator-history", args=[name])
    return render(request, "leaderboard/operator_history.html", {
        "history": history, "targets": history_targets(team, name),
        "release": release, "hardware": hardware or "",
        "api_url": f"{api_url}?{urlencode(query)}" if query else api_url})


@login_required
def submission_compare_page(request: HttpRequest, pk: int, other: int) -> HttpResponse:
    compare = submission_compare(visible_submission(request, pk), visible_submission(request, other))
    return render(request, "leaderboard/compare.html", {"compare": compare})
