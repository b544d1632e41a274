"""Team API: submit, list, read, cancel; quota."""

from __future__ import annotations

from typing import Any

from django.db.models import Max
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated, PermissionDenied, Throttled
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation.models import HardwareProfile, Release
from portal.accounts.auth import is_admin, request_team
from portal.accounts.models import Team
from portal.ratelimit import exceeded, limit
from submissions.models import EvaluationJob, Submission
from submissions.selectors import submission_detail, submission_visible, submissions_visible
from submissions.services import job_cancel, quota_status, submission_create


def acting_team(request: Request) -> Team:
    team = request_team(request)
    if team is None:
        if request.user.is_authenticated or request.auth is not None:
            raise PermissionDenied("you are not a member of any team")
        raise NotAuthenticated("sign in or send a team token")
    return team


class SubmissionIn(serializers.Serializer):
    file = serializers.FileField()
    release = serializers.IntegerField()
    hardware = serializers.CharField()
    operator = serializers.CharField(required=False, allow_blank=True)
    agent = serializers.CharField(required=False, allow_blank=True, max_length=100)
    model = serializers.CharField(required=False, allow_blank=True, max_length=100)
    output_tokens = serializers.IntegerField(required=False, min_value=0, allow_null=True)
    notes = serializers.CharField(required=False, allow_blank=True, max_length=10000)


SUBMISSION_OUT = inline_serializer("SubmissionOut", {
    "id": serializers.IntegerField(), "team": serializers.CharField(),
    "status": serializers.CharField(), "jobs": serializers.ListField(child=serializers.DictField()),
})
SUBMISSION_DETAIL_OUT = inline_serializer("SubmissionDetailOut", {
    "id": serializers.IntegerField(), "team": serializers.CharField(),
    "status": serializers.CharField(), "jobs": serializers.ListField(child=serializers.DictField()),
    "score": inline_serializer("SubmissionScoreOut", {
        "weights_version": serializers.IntegerField(), "ranked": serializers.BooleanField(),
        **{name: serializers.FloatField(allow_null=True) for name in (
            "aggregate", "unweighted_mean", "memory", "compute", "prefill", "decode")},
        "by_operator": serializers.DictField(child=serializers.FloatField(allow_null=True)),
        "correctness_rate": serializers.FloatField(),
        "dsl_adoption_rate": serializers.FloatField(),
        "computed_at": serializers.DateTimeField(),
        "current": serializers.BooleanField(help_text="computed after every scored job ended"),
    }, allow_null=True),
})


class SubmissionListCreateApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(responses=SUBMISSION_OUT, operation_id="submissions_list")
    def get(self, request: Request) -> Response:
        _require_principal(request)
        submissions = submissions_visible(request).order_by("-created_at")[:100]
        return Response([submission_detail(request, s) for s in submissions])

    @extend_schema(request=SubmissionIn, responses={201: SUBMISSION_OUT})
    def post(self, request: Request) -> Response:
        team = acting_team(request)
        wait = exceeded(limit("upload"), f"team:{team.pk}")
        if wait is not None:
            raise Throttled(wait=wait, detail=f"too many uploads; try again in {wait} s")
        data = SubmissionIn(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        release = get_object_or_404(Release, pk=fields["release"])
        hardware = get_object_or_404(HardwareProfile, name=fields["hardware"])
        upload = fields["file"]
        submission = submission_create(
            team=team, user=request.user, release=release, hardware=hardware,
            filename=upload.name, data=upload.read(), operator=fields.get("operator") or None,
            agent=fields.get("agent", ""), model_name=fields.get("model", ""),
            output_tokens=fields.get("output_tokens"), notes=fields.get("notes", ""))
        return Response(submission_detail(request, submission), status=status.HTTP_201_CREATED)


def _require_principal(request: Request) -> None:
    """401 without credentials; other teams' submissions then answer 404, not 403."""
    if not is_admin(request):
        acting_team(request)


class SubmissionDetailApi(APIView):
    @extend_schema(responses=SUBMISSION_DETAIL_OUT)
    def get(self, request: Request, pk: int) -> Response:
        _require_principal(request)
        submission = submission_visible(request, pk)
        return Response({**submission_detail(request, submission),
                         "score": _active_score(submission)})


SCORE_FIELDS = ("ranked", "aggregate", "unweighted_mean", "memory", "compute", "prefill",
                "decode", "correctness_rate", "dsl_adoption_rate", "by_operator")


def _active_score(submission: Submission) -> dict[str, Any] | None:
    """The score under the active weights, as the submission page shows it. Scores are the
    leaderboard's derived data, reached through the reverse relation; a job that ended after
    the score was computed means a rescore is still on its way (`current` is false)."""
    score = (submission.scores.filter(weight_set__active=True).select_related("weight_set")
             .first())
    if score is None:
        return None
    last_scored = (EvaluationJob.objects.filter(candidate__submission=submission,
                                                status=EvaluationJob.Status.SCORED)
                   .aggregate(last=Max("finished_at"))["last"])
    return {"weights_version": score.weight_set.version,
            **{field: getattr(score, field) for field in SCORE_FIELDS},
            "computed_at": score.computed_at.isoformat(),
            "current": last_scored is None or score.computed_at >= last_scored}


class SubmissionCancelApi(APIView):
    @extend_schema(request=None, responses=SUBMISSION_OUT)
    def post(self, request: Request, pk: int) -> Response:
        _require_principal(request)
        submission = submission_visible(request, pk)
        for job in EvaluationJob.objects.filter(candidate__submission=submission):
            job_cancel(job=job)
        return Response(submission_detail(request, submission))


class QuotaApi(APIView):
    @extend_schema(responses=inline_serializer("QuotaOut", {
        "team": serializers.CharField(), "daily_limit": serializers.IntegerField(),
        "used_today": serializers.IntegerField(), "remaining_today": serializers.IntegerField(),
        "resets_at": serializers.DateTimeField(), "concurrent_limit": serializers.IntegerField(),
        "active": serializers.IntegerField()}))
    def get(self, request: Request) -> Response:
        team = acting_team(request)
        quota = quota_status(team)
        return Response({"team": team.name, "daily_limit": quota.daily_limit,
                         "used_today": quota.used_today, "remaining_today": quota.remaining_today,
                         "resets_at": quota.resets_at.isoformat(),
                         "concurrent_limit": quota.concurrent_limit, "active": quota.active})
