"""The Atrex paper's table (leaderboard/paper_table.py): its page, and its JSON and CSV API."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from leaderboard.board_requests import release_and_hardware, weights_asked
from leaderboard.exports import CSV, CSV_OR_JSON, WEIGHTS, _Export, csv_attachment
from leaderboard.paper_table import paper_table, rows_csv
from leaderboard.selectors import recorded_on_boards
from portal import derived_cache
from portal.api_schema import errors

TABLE_CACHE_S = 10


def table_data(query: Any, pk: int, hardware: str) -> dict[str, Any]:
    release, profile = release_and_hardware(pk, hardware)
    weight_set = weights_asked(release, query.get("weights"))
    table = derived_cache.remember(
        (derived_cache.BOARDS, derived_cache.board(release.pk, profile.pk)),
        f"paper-table:{release.pk}:{profile.pk}:{weight_set.pk}",
        lambda: paper_table(release=release, hardware=profile, weight_set=weight_set),
        TABLE_CACHE_S)
    return {"release": release, "hardware": profile, "weight_set": weight_set, "table": table}


def paper_table_page(request: HttpRequest, pk: int, hardware: str) -> HttpResponse:
    data = table_data(request.GET, pk, hardware)
    return render(request, "leaderboard/paper_table.html", {
        **data, "recorded": recorded_on_boards(release=data["release"], hardware=data["hardware"])})


class TableRowOut(serializers.Serializer[Any]):
    row = serializers.CharField(help_text="the team, or the agent / model its submissions name")
    team = serializers.CharField()
    agent = serializers.CharField()
    model = serializers.CharField()
    submission = serializers.IntegerField()
    compile_rate = serializers.FloatField(allow_null=True)
    correct_rate = serializers.FloatField(allow_null=True)
    native_rate = serializers.FloatField(allow_null=True)
    aggregate = serializers.FloatField(allow_null=True, help_text="S_agg")
    vs_torch_compile = serializers.FloatField(allow_null=True, help_text=(
        "median over operators of the torch.compile baseline's summed times over the row's, "
        "on the shapes both timed (above 1: the row is faster)"))
    vs_best_open = serializers.FloatField(allow_null=True, help_text="the same against the best "
                                          "open kernel row")
    vs_production = serializers.FloatField(allow_null=True, help_text="the same against the "
                                           "release's production timings on this hardware")
    output_tokens = serializers.IntegerField(allow_null=True)


class TableOperatorOut(serializers.Serializer[Any]):
    operator = serializers.CharField()
    solve_rate = serializers.FloatField(allow_null=True)
    memory_shapes = serializers.IntegerField()
    compute_shapes = serializers.IntegerField()
    shapes = serializers.IntegerField()


class TableOut(serializers.Serializer[Any]):
    release = serializers.CharField()
    hardware = serializers.CharField()
    weights_version = serializers.IntegerField()
    rows = TableRowOut(many=True)
    operators = TableOperatorOut(many=True)
    references = serializers.DictField(help_text="the torch.compile and best-open-kernel "
                                       "baseline submissions compared with, and whether "
                                       "production timings exist")


class PaperTableApi(_Export):
    """The Atrex paper's table for a release and hardware (docs/teams.md says each column)."""

    @extend_schema(operation_id="paper_table", parameters=[WEIGHTS, CSV_OR_JSON],
                   responses={(200, "application/json"): TableOut, (200, "text/csv"): CSV,
                              **errors(404)})
    def get(self, request: Request, pk: int, hardware: str) -> Response | HttpResponse:
        data = table_data(request.query_params, pk, hardware)
        release, profile = data["release"], data["hardware"]
        if self.wants_csv(request):
            return csv_attachment(rows_csv(data["table"]),
                                  f"{release.name}-v{release.version}-{profile.name}-table.csv")
        return Response(data["table"])


