"""The boards' exports, as documented API views: JSON (the default) or CSV (`?format=csv`),
carrying the same numbers as the pages (leaderboard/board_requests.py reads both).

Public: no sign-in, and no credentials looked at (a stale token in a script's header does
not turn a public board into a 401). Errors are JSON whatever format was asked for.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation.harness.dsl import KNOWN_DSLS
from leaderboard import tiers
from leaderboard.board_requests import (
    BOARD_CACHE_S,
    analysis_data,
    board_data,
    board_kinds,
    operator_board_data,
    rank_changes_data,
)
from leaderboard.selectors import BOARDS, COLUMNS, NUMBER_COLUMNS
from portal import derived_cache
from portal.api_schema import errors, with_fields

OPERATOR_COLUMNS = ("rank", "team", "submission", "score", "date")


EXPORT_COLUMNS = (*COLUMNS, "interval_low", "interval_high", "environment")


def rows_as_csv(rows: Sequence[dict[str, Any]], baselines: Sequence[dict[str, Any]] = (),
                columns: Sequence[str] = EXPORT_COLUMNS) -> str:
    """The board's rows, then its unranked baseline rows (rank empty, badged "baseline")."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    low, high = (columns.index(name) if name in columns else -1
                 for name in ("interval_low", "interval_high"))
    for row in [*rows, *baselines]:
        # a plain list per row (no dict per row, no DictWriter): 1,000 rows in 15 ms, 18.5
        # before (most of what is left is the csv writer's own quoting)
        cells = [row.get(column) for column in columns]
        interval = row.get("interval") or (None, None)
        if low >= 0:
            cells[low] = interval[0]
        if high >= 0:
            cells[high] = interval[1]
        writer.writerow([cell if type(cell) in _PLAIN else _csv_cell(cell) for cell in cells])
    return buffer.getvalue()


_PLAIN = (int, float)  # written as they are (bool is not one of them: exact types)


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection): a
# team's agent "=HYPERLINK(...)" would run for everyone who opens the export.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list):
        value = "; ".join(value)
    if not isinstance(value, str):
        return value  # numbers stay numbers, negative ones included
    if value.startswith(_FORMULA_STARTS):
        value = "'" + value  # a leading quote: the spreadsheet reads the cell as text
    # Python 3.11's writer leaves a field with a bare CR unquoted, and a spreadsheet starts a
    # new row there, whose first cell could be a formula; a newline gets the field quoted.
    return value.replace("\r", "\n")


class CsvRenderer(BaseRenderer):
    """Lets `?format=csv` through content negotiation; the views write the CSV themselves
    (its columns and file name are theirs)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Mapping[str, Any] | None = None) -> bytes:
        raise NotImplementedError("export views answer CSV with a response of their own")


class FastJsonRenderer(JSONRenderer):
    """DRF's JSON, written by orjson: a board's 1,000 rows took DRF's encoder 8-9 ms of an
    uncached export, orjson under 1 ms. The same compact UTF-8 text; what orjson does not
    know (a datetime, a lazy string, a decimal) goes through DRF's encoder, so it reads as
    before. (A stored score is finite: orjson would write a NaN as null.)"""

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Mapping[str, Any] | None = None) -> bytes:
        if data is None:
            return b""
        return orjson.dumps(data, default=self.encoder_class().default,
                            option=orjson.OPT_PASSTHROUGH_DATETIME)


class FormatFirst(DefaultContentNegotiation):
    """`?format=` decides, whatever the Accept header says: scripts (the `atrex` CLI among
    them) send `Accept: application/json` and ask for `?format=csv`, as these exports have
    always allowed. Without `format`, DRF's negotiation."""

    def select_renderer(self, request: Request, renderers: Iterable[BaseRenderer],
                        format_suffix: str | None = None) -> tuple[BaseRenderer, str]:
        renderers = list(renderers)
        wanted = format_suffix or request.query_params.get(self.settings.URL_FORMAT_OVERRIDE)
        for renderer in renderers if wanted else ():
            if renderer.format == wanted:
                return renderer, renderer.media_type
        chosen: tuple[BaseRenderer, str] = super().select_renderer(request, renderers,
                                                                   format_suffix)
        return chosen


class _Export(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    renderer_classes = [FastJsonRenderer, CsvRenderer]
    content_negotiation_class = FormatFirst

    def handle_exception(self, exc: Exception) -> Response:
        # An error is a JSON body, even for ?format=csv: clients parse errors as JSON.
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)

    def wants_csv(self, request: Request) -> bool:
        return getattr(request.accepted_renderer, "format", None) == "csv"

    def finalize_response(self, request: Request, response: Response, *args: Any,
                          **kwargs: Any) -> Response:
        # Only the views' own CSV is CSV: whatever DRF renders itself (the metadata OPTIONS
        # answers, an error) is JSON, even under ?format=csv (CsvRenderer renders nothing).
        if isinstance(response, Response) and self.wants_csv(request):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


def csv_attachment(text: str, filename: str) -> HttpResponse:
    response = HttpResponse(text, content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# -- what the JSON holds (for the schema; the rows are built by leaderboard.selectors) ------

class DslRateOut(serializers.Serializer[Any]):
    dsl = serializers.CharField()
    dsl_name = serializers.CharField(help_text="e.g. CuTe DSL")
    files = serializers.IntegerField()
    shapes = serializers.IntegerField()
    correctness_rate = serializers.FloatField()
    adoption_rate = serializers.FloatField(help_text="shapes correct and native")
    unverified_rate = serializers.FloatField(help_text="shapes correct whose native verdict "
                                             "is unverified (an interpreter check)")


class BoardRowOut(serializers.Serializer[Any]):
    rank = serializers.IntegerField(allow_null=True, help_text="empty for a row not ranked "
                                    "(a baseline, or a submission shown with ?all=1)")
    team = serializers.CharField()
    submission = serializers.IntegerField(allow_null=True)
    dsl = serializers.CharField(help_text="the submission's declared DSL; where its files "
                                "differ, each file's (operator: dsl, ...)")
    aggregate = serializers.FloatField(allow_null=True, help_text="S_agg; null: not timed")
    memory = serializers.FloatField(allow_null=True)
    compute = serializers.FloatField(allow_null=True)
    prefill = serializers.FloatField(allow_null=True)
    decode = serializers.FloatField(allow_null=True)
    unweighted_mean = serializers.FloatField(allow_null=True)
    correctness_rate = serializers.FloatField(allow_null=True)
    dsl_adoption_rate = serializers.FloatField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
    agent = serializers.CharField()
    model = serializers.CharField()
    date = serializers.CharField(help_text="the submission's date (YYYY-MM-DD)")
    badges = serializers.ListField(child=serializers.CharField())
    tier = serializers.CharField(allow_null=True, required=False, help_text=(
        "the narrowest tier holding every shape that earned: explicit-dsl, self-authored or "
        "libraries (leaderboard/tiers.py); null: none earned"))


class BoardOut(serializers.Serializer[Any]):
    release = serializers.CharField()
    hardware = serializers.CharField()
    board = serializers.ChoiceField(choices=list(BOARDS))
    weights_version = serializers.IntegerField()
    frozen_at = serializers.DateTimeField(allow_null=True)
    rows = BoardRowOut(many=True)
    baselines = BoardRowOut(many=True, help_text="unranked: the reference baselines and the "
                            "release's production timings")
    dsl_rates = DslRateOut(many=True, help_text="per declared DSL over every file submitted "
                           "to the board: shapes correct, and correct and native")


class OperatorRowOut(serializers.Serializer[Any]):
    rank = serializers.IntegerField()
    team = serializers.CharField()
    submission = serializers.IntegerField()
    score = serializers.FloatField(allow_null=True, help_text="S_op; null: not timed")
    correctness_rate = serializers.FloatField()
    date = serializers.CharField()


class OperatorBaselineOut(serializers.Serializer[Any]):
    team = serializers.CharField(help_text="the baseline's name")
    submission = serializers.IntegerField()
    score = serializers.FloatField(allow_null=True, help_text="S_op; null: not timed")
    correctness_rate = serializers.FloatField()
    date = serializers.CharField()


class OperatorBoardOut(serializers.Serializer[Any]):
    release = serializers.CharField()
    hardware = serializers.CharField()
    weights_version = serializers.IntegerField()
    operator = serializers.CharField()
    rows = OperatorRowOut(many=True)
    teams = serializers.IntegerField()
    solve_rate = serializers.FloatField(allow_null=True,
                                        help_text="teams correct and native on every shape; "
                                                  "null: no team yet")
    median_score = serializers.FloatField(allow_null=True)
    baselines = OperatorBaselineOut(many=True, help_text="unranked: the reference baselines' "
                                                         "S_op on this operator")


class AnalysisPointOut(serializers.Serializer[Any]):
    submission = serializers.IntegerField()
    team = serializers.CharField()
    agent = serializers.CharField()
    model = serializers.CharField()
    output_tokens = serializers.IntegerField()
    aggregate = serializers.FloatField()


class AnalysisOut(serializers.Serializer[Any]):
    release = serializers.CharField()
    hardware = serializers.CharField()
    weights_version = serializers.IntegerField()
    points = AnalysisPointOut(many=True)


class RankChangeOut(serializers.Serializer[Any]):
    team = serializers.CharField()
    rank_before = serializers.IntegerField(allow_null=True)
    rank_after = serializers.IntegerField(allow_null=True)
    aggregate_before = serializers.FloatField(allow_null=True)
    aggregate_after = serializers.FloatField(allow_null=True)
    move = serializers.IntegerField(allow_null=True, help_text="places up (positive) or down")


# "from" is a Python keyword: named in the data, not as a class attribute
@with_fields(from_=serializers.IntegerField(help_text="weights version before"),
             to=serializers.IntegerField(help_text="weights version after"))
class RankChangesOut(serializers.Serializer[Any]):
    release = serializers.CharField()
    hardware = serializers.CharField()
    rows = RankChangeOut(many=True)


WEIGHTS = OpenApiParameter("weights", str, description="weights version (default: the active "
                           "one)")
CSV_OR_JSON = OpenApiParameter("format", str, enum=["json", "csv"],
                               description="csv: the same rows as a spreadsheet file")
CSV = OpenApiResponse(OpenApiTypes.STR, description="?format=csv: the rows, one per line")


BOARD_PARAMETERS = [
    WEIGHTS, CSV_OR_JSON,
    OpenApiParameter("board", str, enum=list(BOARDS), description=(
        "which score ranks (default: the address's board, else aggregate)")),
    OpenApiParameter("all", str, enum=["1"], description=(
        "1: every submission (unranked ones badged), not the best per team")),
    OpenApiParameter("sort", str, enum=list(NUMBER_COLUMNS), description=(
        "order rows by this column (default: the board's score)")),
    OpenApiParameter("dsl", str, enum=list(KNOWN_DSLS), description=(
        "only submissions with a file declared in this DSL")),
    OpenApiParameter("tier", str, enum=list(tiers.ORDER), description=(
        "only submissions within this tier (it or a narrower one), among those the release "
        "ranks"))]
BOARD_RESPONSES: dict[Any, Any] = {(200, "application/json"): BoardOut, (200, "text/csv"): CSV,
                                   **errors(404)}


class BoardExportApi(_Export):
    """A board's rows: each team's best whole, ranked evaluation, then the unranked baselines."""

    @extend_schema(operation_id="board_export", parameters=BOARD_PARAMETERS,
                   responses=BOARD_RESPONSES)
    def get(self, request: Request, pk: int, hardware: str,
            board: str = "aggregate") -> Response | HttpResponse:
        data = board_data(request.query_params, pk, hardware, board)
        release, profile = data["release"], data["hardware"]
        if self.wants_csv(request):
            # written once per board version, like a page's table (1,000 rows: 15 ms)
            text = derived_cache.remember(
                board_kinds(release, profile), f"csv:{data['cache_key']}",
                lambda: rows_as_csv(data["rows"], data["baselines"], columns=EXPORT_COLUMNS),
                BOARD_CACHE_S)
            return csv_attachment(text, f"{release.name}-v{release.version}-{profile.name}-"
                                        f"{data['board']}.csv")
        freeze = data["freeze"]
        return Response({"release": str(release), "hardware": profile.name,
                         "board": data["board"], "weights_version": data["weight_set"].version,
                         "frozen_at": freeze.frozen_at.isoformat() if freeze else None,
                         "rows": data["rows"], "baselines": data["baselines"],
                         "dsl_rates": data["dsl_rates"]})


class NamedBoardExportApi(BoardExportApi):
    """The board the address names (aggregate, memory, compute, prefill, decode)."""

    @extend_schema(operation_id="named_board_export", parameters=BOARD_PARAMETERS,
                   responses=BOARD_RESPONSES)
    def get(self, request: Request, pk: int, hardware: str,
            board: str = "aggregate") -> Response | HttpResponse:
        return super().get(request, pk, hardware, board)


class OperatorBoardExportApi(_Export):
    """One operator's board: each team's best S_op, and how hard the operator is."""

    @extend_schema(operation_id="operator_board_export", parameters=[WEIGHTS, CSV_OR_JSON],
                   responses={(200, "application/json"): OperatorBoardOut, (200, "text/csv"): CSV,
                              **errors(404)})
    def get(self, request: Request, pk: int, hardware: str,
            operator: str) -> Response | HttpResponse:
        data = operator_board_data(request.query_params, pk, hardware, operator)
        release, profile, weight_set = data.pop("release"), data.pop("hardware"), \
            data.pop("weight_set")
        if self.wants_csv(request):
            return csv_attachment(rows_as_csv(data["rows"], columns=OPERATOR_COLUMNS),
                                  f"{release.name}-v{release.version}-{profile.name}-"
                                  f"{operator}.csv")
        return Response({"release": str(release), "hardware": profile.name,
                         "weights_version": weight_set.version, **data})


class AnalysisExportApi(_Export):
    """Output tokens against S_agg, one point per ranked submission that reported tokens."""

    renderer_classes = [JSONRenderer]

    @extend_schema(operation_id="board_analysis_export", parameters=[WEIGHTS],
                   responses={200: AnalysisOut, **errors(404)})
    def get(self, request: Request, pk: int, hardware: str) -> Response:
        data = analysis_data(request.query_params, pk, hardware)
        return Response({"release": str(data["release"]), "hardware": data["hardware"].name,
                         "weights_version": data["weight_set"].version,
                         "points": data["points"]})


class RankChangesExportApi(_Export):
    """Each team's rank and S_agg under two weight versions, biggest moves first."""

    renderer_classes = [JSONRenderer]

    @extend_schema(operation_id="board_changes_export",
                   parameters=[OpenApiParameter("from", str, description="weights version "
                                                "before (default: the one before `to`)"),
                               OpenApiParameter("to", str, description="weights version after "
                                                "(default: the active one)")],
                   responses={200: RankChangesOut, **errors(404)})
    def get(self, request: Request, pk: int, hardware: str) -> Response:
        data = rank_changes_data(request.query_params, pk, hardware)
        return Response({"release": str(data["release"]), "hardware": data["hardware"].name,
                         "from": data["before"].version, "to": data["after"].version,
                         "rows": data["rows"]})
