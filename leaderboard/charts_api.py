"""The submission page's chart data as a documented API view (in the OpenAPI schema, like
every other /api/ route).

Read with the page's own session, as before: a team token is not looked at (a script reads
the same numbers from /api/submissions/{id}/ and the board exports)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.selectors import submission_charts
from portal.api_schema import errors
from submissions.visibility import visible_submission


class ChartPointOut(serializers.Serializer[Any]):
    """One shape's point on the roofline chart (its latest attempt)."""

    operator = serializers.CharField()
    shape = serializers.CharField()
    intensity = serializers.FloatField(help_text="W / Q: FLOP per byte of semantic traffic")
    attainment = serializers.FloatField(allow_null=True, help_text="SOL / measured time; null: "
                                        "not timed")
    verdict = serializers.CharField(help_text="the shape's DSL verdict (native, fallback, "
                                    "mixed, ...); empty when it has none")


class SubmissionChartsOut(serializers.Serializer[Any]):
    ridge_bf16 = serializers.FloatField(help_text="the hardware's ridge point for bf16 work "
                                        "(FLOP/byte): peak over HBM bandwidth; 0 without a "
                                        "bf16 peak")
    hardware = serializers.CharField()
    points = ChartPointOut(many=True, help_text="shapes without a roofline are left out")
    by_operator = serializers.DictField(child=serializers.FloatField(allow_null=True),
                                        help_text="S_op per operator under the active weights")
    aggregate = serializers.FloatField(allow_null=True, help_text="S_agg under the active "
                                       "weights; null before a score is stored")


class SubmissionChartsApi(APIView):
    authentication_classes = [SessionAuthentication]
    renderer_classes = [JSONRenderer]

    @extend_schema(responses={200: SubmissionChartsOut, **errors(404)})
    def get(self, request: Request, pk: int) -> Response:
        """A submission's roofline points and scores, for its page's charts."""
        return Response(submission_charts(visible_submission(request, pk)))
