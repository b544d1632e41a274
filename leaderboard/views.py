"""Boards (aggregate, per regime, per phase, per operator), analysis and what-changed pages
(their JSON and CSV exports, with the same numbers, are API views: leaderboard/exports.py);
admin board tools."""

from __future__ import annotations

from html import escape
from typing import Any, NamedTuple

from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import floatformat
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods, require_POST

from evaluation.catalog.capability import portal_capability
from evaluation.catalog.models import Release
from evaluation.catalog.selectors import newest_release
from leaderboard import tiers
from leaderboard.board_requests import (
    BOARD_CACHE_S,
    analysis_data,
    board_data,
    board_kinds,
    operator_board_data,
    rank_changes_data,
    release_and_hardware,
)
from leaderboard.forms import (
    ActivateForm,
    BoardFreezeForm,
    FallbackPolicyForm,
    ImportanceFileForm,
    RankedTierForm,
    WeightsForm,
    first_problem,
)
from leaderboard.overview import (
    Coverage,
    board_index,
    headline_boards,
    recent_activity,
    shape_coverage,
)
from leaderboard.scoring import WeightError
from leaderboard.selectors import (
    BOARDS,
    COLUMN_LABELS,
    COLUMNS,
    NUMBER_COLUMNS,
    recorded_on_boards,
)
from leaderboard.services import (
    board_freeze_set,
    board_unfreeze,
    release_set_fallback_policy,
    release_set_ranked_tier,
    weight_set_activate,
    weight_set_create,
)
from portal import derived_cache
from portal.htmx import HtmxRequest
from submissions.forms import form_or_400

PAGE_SIZE = 50  # rows per board page; the JSON and CSV exports carry every row
SCORE_COLUMNS = ("aggregate", "memory", "compute", "prefill", "decode", "unweighted_mean")
NO_INTERVAL_TITLE = ("no 95% interval: these results carry no timing samples (recorded "
                     "elsewhere, or stored before 2026-12-03); a ranked row ranks by position")


class Cell(NamedTuple):
    """One board cell, formatted once in Python: the template only places it."""

    text: str
    num: bool
    badges: list[tuple[str, str]]  # (css class, label)
    title: str = ""  # shown on hover: the submission's environment
    label: str = ""  # its column's header: the phone layout shows it beside the value
    note: str = ""  # a second, smaller line: the board's own score's interval

    def html(self) -> str:
        """The cell's <td>, every value escaped: written here (the standard library's
        escape, no format_html, whose machinery cost as much as the template's loops did)
        instead of by the template's loops over 50 rows of 17 cells, a third of an
        uncached board page."""
        badges = "".join(f'<span class="badge {escape(css)}">{escape(label)}</span> '
                         for css, label in self.badges)
        note = f'<small class="interval">{escape(self.note)}</small>' if self.note else ""
        title = f' title="{escape(self.title)}"' if self.title else ""
        num = ' class="num"' if self.num else ""
        return (f'<td data-label="{escape(self.label)}"{num}{title}>'
                f"{badges}{escape(self.text)}{note}</td>")


def row_html(cells: list[Cell]) -> str:
    """A board row's cells, as the table places them inside its <tr>."""
    return mark_safe("".join(cell.html() for cell in cells))  # noqa: S308 (each cell escaped)


def _cells(row: dict[str, Any], baseline: bool = False,
           empty_columns: frozenset[str] = frozenset(),
           coverage: Coverage | None = None) -> list[Cell]:
    cells = [cell._replace(label=COLUMN_LABELS[column])
             for column, cell in zip(COLUMNS, _values(row, baseline, empty_columns), strict=True)]
    if coverage is not None:
        # A row's S_op stand on the shapes it covers: a recorded or cancelled evaluation may
        # cover few of an operator's. Under its number, the count; each operator's on hover.
        at = COLUMNS.index("submission")
        detail = ("the dev tier only (an interpreter check)" if coverage.dev_only
                  else f"scored-tier shapes covered: {coverage.detail}")
        cells[at] = cells[at]._replace(
            note=f"{coverage.text} shapes" if not coverage.dev_only else "dev tier",
            title="\n".join(t for t in (cells[at].title, detail) if t))
    return cells


def _values(row: dict[str, Any], baseline: bool, empty_columns: frozenset[str]) -> list[Cell]:
    cells = []
    for column in COLUMNS:
        value, num = row.get(column), column in NUMBER_COLUMNS
        if column in empty_columns:
            cells.append(Cell("–", num, [], f"no shape of this release is in {COLUMN_LABELS[column]}"))
        elif column == "badges":
            cells.append(Cell("", num, [("baseline" if baseline else b, b) for b in value or ()]))
        elif column == "submission":
            cells.append(Cell(f"#{value}" if value else "", num, [],
                              str(row.get("environment") or "")))
        elif value is None:
            # A score is None when a correct shape has no time (no GPU): not timed, not 0.
            cells.append(Cell("not timed" if column in SCORE_COLUMNS else "–", num, []))
        elif column == row.get("ranked_by") and row.get("interval") is not None:
            low, high = row["interval"]
            cells.append(Cell(floatformat(value, 3), num, [],
                              f"95% interval {floatformat(low, 3)} to {floatformat(high, 3)}",
                              note=f"± {floatformat(high - value, 3)}"))
        elif column == row.get("ranked_by"):
            cells.append(Cell(floatformat(value, 3), num, [], NO_INTERVAL_TITLE,
                              note="no interval"))
        else:
            cells.append(Cell(floatformat(value, 3) if num else str(value), num, []))
    return cells


def board_page(request: HtmxRequest, pk: int, hardware: str,
               board: str = "aggregate") -> HttpResponse:
    data = board_data(request.GET, pk, hardware, board)
    rows = data.pop("rows")
    release = data["release"]
    query = request.GET.copy()  # what sorting and paging links keep
    query.pop("page", None)
    query.pop("sort", None)
    sort = request.GET.get("sort", data["board"])
    page_number = request.GET.get("page")

    empty = frozenset(data["empty_columns"])

    def table() -> str:
        """The table and pager: the same for every visitor, so rendered once per version."""
        page = Paginator(rows, PAGE_SIZE).get_page(page_number)
        shown = [*page.object_list, *data["baselines"]]
        covered = shape_coverage(release, [int(r["submission"]) for r in shown
                                           if r.get("submission")])
        return render_to_string("leaderboard/board.html#table", {
            "page": page, "table": [row_html(_cells(row, empty_columns=empty,
                                                    coverage=covered.get(row["submission"])))
                                    for row in page.object_list],
            "environments": sorted({str(r["environment"]) for r in shown if r.get("environment")}),
            "baseline_table": [row_html(_cells(row, baseline=True, empty_columns=empty,
                                               coverage=covered.get(row["submission"])))
                               for row in data["baselines"]],
            "columns": [(c, COLUMN_LABELS[c]) for c in COLUMNS],
            "number_columns": NUMBER_COLUMNS, "sort": sort,
            "query": query.urlencode()})

    table_html = derived_cache.remember(
        board_kinds(release, data["hardware"]), f"table:{data['cache_key']}:{page_number}:{sort}:"
        f"{query.urlencode()}", table, BOARD_CACHE_S)
    # Sorting and paging swap the table; boosted links (other boards, weights, all/best per
    # team) swap the whole body, so they get the full page.
    if request.htmx and not request.htmx.boosted:
        response = HttpResponse(table_html)
    else:
        response = render(request, "leaderboard/board.html", {
            **data, "table_html": table_html, "boards": BOARDS,
            "board_title": BOARDS[data["board"]],
            "operators": release.operators.order_by("name").values_list("name", flat=True),
            "versions": release.weight_sets.order_by("-version"), "query": query.urlencode(),
            "show_all": request.GET.get("all") == "1", "newest": newest_release(release)})
    response["Vary"] = "HX-Request"
    return response


def analysis_page(request: HttpRequest, pk: int, hardware: str) -> HttpResponse:
    """Output tokens an agent spent against the S_agg it reached, one point per submission."""
    data = analysis_data(request.GET, pk, hardware)
    return render(request, "leaderboard/analysis.html", {**data, **_recorded(data)})


def rank_changes_page(request: HttpRequest, pk: int, hardware: str) -> HttpResponse:
    data = rank_changes_data(request.GET, pk, hardware)
    return render(request, "leaderboard/changes.html",
                  {**data, **_recorded(data),
                   "versions": data["release"].weight_sets.order_by("-version")})


@staff_member_required
@require_POST
def board_freeze_toggle(request: HttpRequest, pk: int, hardware: str) -> HttpResponse:
    """Admins: freeze the board at this moment, or unfreeze it (audited)."""
    release, profile = release_and_hardware(pk, hardware)
    if form_or_400(BoardFreezeForm(request.POST))["action"] == "freeze":
        board_freeze_set(release=release, hardware=profile, actor=request.user)
    else:
        board_unfreeze(release=release, hardware=profile, actor=request.user)
    return redirect("board", pk=release.pk, hardware=profile.name)


@staff_member_required
@require_http_methods(["GET", "POST"])
def weights_page(request: HttpRequest, pk: int) -> HttpResponse:
    """Admins: weight versions of a release; create one (form or importance file), activate."""
    release = get_object_or_404(Release, pk=pk)
    error = None
    if request.method == "POST":
        try:
            _weights_post(request, release)
            return redirect("weights", pk=release.pk)
        except WeightError as exc:
            error = str(exc)
    active = release.weight_sets.filter(active=True).first()
    current = active.weights if active else {}
    return render(request, "leaderboard/weights.html", {
        "release": release, "weight_sets": release.weight_sets.order_by("-version"),
        # the new-version form starts from the active values
        "operators": [(op.name, current.get(op.name)) for op in
                      release.operators.order_by("name")],
        "active": active, "error": error, "tier_choices": tiers.CHOICES},
        status=400 if error else 200)


def front_page(request: HttpRequest) -> HttpResponse:
    """What the portal is, each release's headline board with its leaders per operator,
    recent submissions, what this portal evaluates and how to start."""
    headlines = headline_boards()
    capability = portal_capability()
    current = capability.current_releases
    example = current[0].name if current else (headlines[0].release.name if headlines
                                                else "RELEASE")
    return render(request, "front.html", {
        "headlines": headlines, "activity": recent_activity(), "capability": capability,
        "public_url": settings.ATREX_PUBLIC_URL, "example_release": example,
        "example_hardware": (capability.hardware or ("H200",))[0],
        "leaders": {h.release.pk: h.leaders for h in headlines}})


def boards_index(request: HttpRequest) -> HttpResponse:
    """The header's Boards link: every release by every hardware profile with the rows each
    board holds; each release opens on its fullest board."""
    index = board_index()
    return render(request, "leaderboard/boards_index.html", {
        "index": index, "hardware": [c.hardware for c in index[0].cells] if index else []})


def public_weights_page(request: HttpRequest, pk: int) -> HttpResponse:
    """Everyone: the importance weights boards combine S_op with, every version's values."""
    release = get_object_or_404(Release, pk=pk)
    versions = list(release.weight_sets.order_by("-version"))
    operators = list(release.operators.order_by("name").values_list("name", flat=True))
    rows = [(name, [ws.weights.get(name) for ws in versions]) for name in operators]
    active = next((ws for ws in versions if ws.active), None)
    if active is not None:
        rows.sort(key=lambda row: -(active.weights.get(row[0]) or 0.0))
    return render(request, "leaderboard/public_weights.html", {
        "release": release, "versions": versions, "rows": rows, "active": active})


def _weights_post(request: HttpRequest, release: Release) -> None:
    """Each of the page's forms posts its own field: which one came says what to do.
    Raises WeightError with what is wrong."""
    if "fallback_scores_zero" in request.POST:
        policy = FallbackPolicyForm(request.POST)
        if not policy.is_valid():
            raise first_problem(policy)
        release_set_fallback_policy(release=release, actor=request.user,
                                    fallback_scores_zero=policy.scores_zero)
    elif "ranked_tier" in request.POST:
        tier = RankedTierForm(request.POST)
        if not tier.is_valid():
            raise first_problem(tier)
        release_set_ranked_tier(release=release, actor=request.user,
                                tier=tier.cleaned_data["ranked_tier"])
    elif "activate" in request.POST:
        activate = ActivateForm(request.POST)
        if not activate.is_valid():
            raise first_problem(activate)
        weight_set = get_object_or_404(release.weight_sets,
                                       version=activate.cleaned_data["activate"])
        weight_set_activate(weight_set=weight_set, actor=request.user)
    elif "importance" in request.FILES:
        upload = ImportanceFileForm(request.POST, request.FILES)
        if not upload.is_valid():
            raise first_problem(upload)
        weight_set_create(release=release, weights=upload.cleaned_data["importance"],
                          source="importance_file", author=request.user, note="")
    else:
        manual = WeightsForm(request.POST,
                             operators=release.operators.values_list("name", flat=True))
        if not manual.is_valid():
            raise first_problem(manual)
        weight_set_create(release=release, weights=manual.weights(), source="manual",
                          author=request.user, note=manual.cleaned_data["note"])


def operator_board_page(request: HttpRequest, pk: int, hardware: str,
                        operator: str) -> HttpResponse:
    data = operator_board_data(request.GET, pk, hardware, operator)
    query = request.GET.copy()  # what the pager's links keep
    query.pop("page", None)
    page = Paginator(data["rows"], PAGE_SIZE).get_page(request.GET.get("page"))
    # a page of rows, as the boards show them (the exports carry every row), rendered once
    # per board version: all of 1,000 teams' rows took the page 75 ms to render uncached
    table_html = derived_cache.remember(
        board_kinds(data["release"], data["hardware"]),
        f"operator-table:{data['release'].pk}:{data['hardware'].pk}:{data['weight_set'].pk}:"
        f"{operator}:{page.number}:{query.urlencode()}",
        lambda: render_to_string("leaderboard/_operator_table.html", {
            **data, "rows": page.object_list, "page": page, "query": query.urlencode()}),
        BOARD_CACHE_S)
    return render(request, "leaderboard/operator_board.html",
                  {**data, **_recorded(data), "table_html": table_html})


def _recorded(data: dict[str, Any]) -> dict[str, list[str]]:
    """The provenance line's sources: recorded results among the page's submissions."""
    return {"recorded": recorded_on_boards(release=data["release"], hardware=data["hardware"])}
