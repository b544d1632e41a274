"""The submission page's chart data as a documented API view (in the OpenAPI schema, like
every other /api/ route).

Read with the page's own session, as before: a team token is not looked at (a script reads
the same numbers from /api/submissions/{id}/ and the board exports)."""

from __future__ import annotations

from typing import Any

from django.db.models import F
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation.harness.release import DTYPE_TO_PEAK_PATH
from leaderboard.outcomes import arithmetic_intensity
from leaderboard.submission_scores import active_weights_score
from portal.api_schema import errors
from submissions.models import ShapeResult, Submission
from submissions.visibility import visible_submission


def submission_charts(submission: Submission) -> dict[str, Any]:
    """Data for the submission page's charts (static/charts.js): each shape's roofline point
    (W/Q against attainment, latest attempt) and the scores under the active weights."""
    hardware = submission.hardware
    results = (ShapeResult.objects
               .filter(job__candidate__submission=submission, attempt=F("job__attempts"))
               .select_related("shape__operator__hidden").order_by("shape__operator__name",
                                                                    "shape__position"))
    points = [{"operator": r.shape.operator.name, "shape": r.shape.shape_id,
               "intensity": arithmetic_intensity(r.shape.operator, r.shape.shape_id),
               "attainment": r.attainment, "verdict": r.verdict} for r in results]
    score = active_weights_score(submission)
    spec, bf16 = hardware.as_spec(), DTYPE_TO_PEAK_PATH["bf16"]
    return {
        # the chart's one ridge line, for bf16 work (0 where the profile has no such peak)
        "ridge_bf16": spec.ridge_point(bf16) if bf16 in spec.peak_flops else 0.0,
        "hardware": hardware.name,
        "points": [p for p in points if p["intensity"] is not None],
        "by_operator": score.by_operator if score else {},
        "aggregate": score.aggregate if score else None,
    }


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
