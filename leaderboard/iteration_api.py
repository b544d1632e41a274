"""Team API for iterating: an operator's history of scores; two submissions compared."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.iteration import operator_history, submission_compare
from leaderboard.iteration_views import history_filters, operator_or_404
from portal.accounts.viewer import ViewerApiRequest
from portal.api_schema import errors
from submissions.api import SUBMISSION_STATUSES, ReleaseRefOut, acting_team
from submissions.models import EvaluationJob, Submission
from submissions.services import MAX_BIG_INTEGER
from submissions.visibility import visible_submission


class HistoryIn(serializers.Serializer[Any]):
    release = serializers.IntegerField(required=False, min_value=0, max_value=MAX_BIG_INTEGER,
                                       help_text="only this release (id)")
    hardware = serializers.CharField(required=False, allow_blank=True, max_length=50,
                                     help_text="only this hardware profile (name)")


class SubmissionRefOut(serializers.Serializer[Any]):
    """Which submission a history row or a compare side is."""

    submission = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    release = ReleaseRefOut()
    hardware = serializers.CharField()
    agent = serializers.CharField()
    model = serializers.CharField()


class HistoryEntryOut(SubmissionRefOut):
    """One submission that included the operator (leaderboard.iteration.operator_history)."""

    mode = serializers.ChoiceField(choices=Submission.Mode.choices,
                                   help_text="check: the team's own try, never ranked")
    status = serializers.ChoiceField(choices=EvaluationJob.Status.choices,
                                     help_text="the operator's evaluation job")
    interpreter = serializers.BooleanField(help_text="the job ran in Triton's CPU interpreter: "
                                           "an interpreter check, nothing timed, never ranked")
    s_op = serializers.FloatField(allow_null=True, help_text="median shape score; null: not "
                                  "scored yet, or correct but not timed (no GPU)")
    shapes_total = serializers.IntegerField()
    shapes_evaluated = serializers.IntegerField()
    correct = serializers.IntegerField()
    native = serializers.IntegerField()
    suspicious = serializers.IntegerField()
    correctness_rate = serializers.FloatField(allow_null=True)
    dsl_adoption_rate = serializers.FloatField(allow_null=True)
    verdicts = serializers.DictField(child=serializers.IntegerField(),
                                     help_text="verdict (or status of a failed shape) -> shapes")
    sha256 = serializers.CharField()
    previous = serializers.IntegerField(allow_null=True,
                                        help_text="the submission of the entry before it")
    source_changed = serializers.BooleanField(help_text="differs from the entry before it "
                                              "(true for the first)")


class HistoryOut(serializers.Serializer[Any]):
    team = serializers.CharField()
    operator = serializers.CharField()
    entries = HistoryEntryOut(many=True, help_text="oldest to newest")
    best = HistoryEntryOut(allow_null=True, help_text=(
        "the best entry: the higher S_op, then the higher share of correct shapes, then the "
        "newer; never one with no correct shape (null then); a correct entry without a GPU "
        "time beats a failed one"))
    truncated = serializers.BooleanField(help_text="older entries left out")


class OperatorHistoryApi(APIView):
    @extend_schema(parameters=[HistoryIn], responses={200: HistoryOut, **errors(400, 403, 404)})
    def get(self, request: ViewerApiRequest, operator: str) -> Response:
        team = acting_team(request)
        query = HistoryIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        name = operator_or_404(operator)
        filters = history_filters(query.validated_data.get("release"),
                                  query.validated_data.get("hardware"))
        return Response(HistoryOut(operator_history(team=team, operator=name, **filters)).data)


class CompareSideOut(SubmissionRefOut):
    """One of the two submissions compared."""

    team = serializers.CharField()
    mode = serializers.ChoiceField(choices=Submission.Mode.choices,
                                   help_text="check: never ranked")
    status = serializers.ChoiceField(choices=SUBMISSION_STATUSES)
    interpreter = serializers.BooleanField(help_text="a job ran in Triton's CPU interpreter")
    aggregate = serializers.FloatField(allow_null=True, help_text="S_agg, active weights")
    weights_version = serializers.IntegerField(allow_null=True)
    by_operator = serializers.DictField(child=serializers.FloatField(allow_null=True),
                                        help_text="S_op per operator submitted")


class CandidateSideOut(serializers.Serializer[Any]):
    status = serializers.CharField(help_text="the operator's job status")
    s_op = serializers.FloatField(allow_null=True)
    sha256 = serializers.CharField()


class ShapeSideOut(serializers.Serializer[Any]):
    status = serializers.CharField()
    verdict = serializers.CharField()
    median_s = serializers.FloatField(allow_null=True)
    attainment = serializers.FloatField(allow_null=True)
    dsl_ratio = serializers.FloatField(allow_null=True)
    suspicious = serializers.BooleanField()


class CompareShapeOut(serializers.Serializer[Any]):
    shape_id = serializers.CharField()
    a = ShapeSideOut(allow_null=True)
    b = ShapeSideOut(allow_null=True)
    median_s_delta = serializers.FloatField(allow_null=True, help_text="time B − time A")
    speedup = serializers.FloatField(allow_null=True, help_text="time A / time B")
    attainment_delta = serializers.FloatField(allow_null=True, help_text="B − A")
    verdict_changed = serializers.BooleanField()


class CompareOperatorOut(serializers.Serializer[Any]):
    operator = serializers.CharField()
    a = CandidateSideOut(allow_null=True, help_text="null: A has no candidate for it")
    b = CandidateSideOut(allow_null=True)
    s_op_delta = serializers.FloatField(allow_null=True, help_text="S_op B − S_op A")
    source_changed = serializers.BooleanField()
    diff = serializers.CharField(allow_blank=True, help_text="unified diff, A's source to B's")
    shapes = CompareShapeOut(many=True)


class CompareOut(serializers.Serializer[Any]):
    a = CompareSideOut()
    b = CompareSideOut()
    same_target = serializers.BooleanField(help_text="same release and hardware")
    operators = CompareOperatorOut(many=True)


class SubmissionCompareApi(APIView):
    @extend_schema(responses={200: CompareOut, **errors(403, 404)})
    def get(self, request: ViewerApiRequest, pk: int, other: int) -> Response:
        if not request.viewer.admin:
            acting_team(request)  # 401 without credentials; others' submissions are 404
        compare = submission_compare(visible_submission(request, pk),
                                     visible_submission(request, other))
        return Response(CompareOut(compare).data)
