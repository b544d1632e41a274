"""Team API: submit, list, read, cancel; quota."""

from __future__ import annotations

import time
from typing import Any, NoReturn

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated, PermissionDenied, Throttled
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.submission_scores import active_score, submission_settled
from portal.accounts.auth import audit_token_use, request_token, require_scope
from portal.accounts.models import Team, TokenScope
from portal.accounts.viewer import ViewerApiRequest
from portal.api_schema import errors, form_schema, with_fields
from submissions.forms import SubmissionForm
from submissions.jobs import job_cancel
from submissions.models import MODE_RANKED, EvaluationJob, NcuProfile, Submission
from submissions.ncu import ncu_profile_detail, ncu_profile_request, ncu_profiles_of
from submissions.profile import submission_profile
from submissions.results import WALL_TIME_KEY
from submissions.selectors import (
    submission_detail,
    submissions_visible,
)
from submissions.services import quota_status, submission_create_once
from submissions.throttles import UploadThrottle
from submissions.visibility import visible_submission


def acting_team(request: ViewerApiRequest) -> Team:
    team = request.viewer.team
    if team is None:
        if request.user.is_authenticated or request.auth is not None:
            raise PermissionDenied("you are not a member of any team")
        raise NotAuthenticated("sign in or send a team token")
    return team


# A submission's status summarises its jobs' (submissions.selectors.submission_status).
SUBMISSION_STATUSES = [*EvaluationJob.Status.values, "empty"]


# The API's names for a shape result's fields where they differ from the model's: the wall
# time (ShapeResult.wall_time_s) keeps the harness's wire key, which clients and agents read
# (ResultOut, ShapeProfileOut). The one place the API renames them.
PUBLIC_RESULT_NAMES = {"wall_time_s": WALL_TIME_KEY}


def _result_out(row: dict[str, Any]) -> dict[str, Any]:
    """One shape's result (of a job, or of the profile) under the API's names, in its order."""
    return {PUBLIC_RESULT_NAMES.get(key, key): value for key, value in row.items()}


def _detail_out(submission: Submission, *, admin: bool) -> dict[str, Any]:
    detail = submission_detail(submission, admin=admin)
    return {**detail, "jobs": [{**job, "results": [_result_out(r) for r in job["results"]]}
                               for job in detail["jobs"]]}


def _profile_out(profile: dict[str, Any]) -> dict[str, Any]:
    return {**profile, "operators": [{**op, "shapes": [_result_out(s) for s in op["shapes"]]}
                                     for op in profile["operators"]]}


class ForeignKernelOut(serializers.Serializer[Any]):
    name = serializers.CharField()
    category = serializers.CharField(help_text="torch, vendor or compiled")
    count = serializers.IntegerField(help_text="launches in one forward")


class ResultOut(serializers.Serializer[Any]):
    """One shape's result, as submissions.selectors.job_detail gives it."""

    shape_id = serializers.CharField()
    status = serializers.CharField()
    stage_reached = serializers.CharField()
    failed_stage = serializers.CharField()
    error = serializers.CharField()
    max_abs_error = serializers.FloatField(allow_null=True)
    max_rel_error = serializers.FloatField(allow_null=True)
    verdict = serializers.CharField()
    dsl_ratio = serializers.FloatField(allow_null=True)
    median_s = serializers.FloatField(allow_null=True, help_text=(
        "the scored time, seconds: the device span of one forward (first device activity's "
        "start to the last one's end, any stream), median"))
    p10_s = serializers.FloatField(allow_null=True)
    p90_s = serializers.FloatField(allow_null=True)
    samples = serializers.IntegerField(allow_null=True)
    launch_method = serializers.CharField(help_text="graph (CUDA-graph replay) or eager")
    wall_median_s = serializers.FloatField(allow_null=True, help_text=(
        "the end-to-end wall time of one call, seconds (CUDA events around it, no profiler): "
        "what the host adds on top of the span"))
    attainment = serializers.FloatField(allow_null=True)
    attainment_with_floor = serializers.FloatField(allow_null=True)
    suspicious = serializers.BooleanField()
    foreign_kernels = ForeignKernelOut(many=True, help_text=(
        "what ran besides the candidate's own DSL kernels in one forward (in Triton's "
        "interpreter: the aten compute ops)"))
    aten_compute_ops = serializers.DictField(child=serializers.IntegerField(), help_text=(
        "aten ops that compute (not allocate or view), issued outside the candidate's DSL "
        "launches: op -> count"))
    # Admins also get the hidden roofline's numbers, left out of this public description.


class QueuePlaceOut(serializers.Serializer[Any]):
    position = serializers.IntegerField(help_text="1: next for its hardware's workers")
    queued_ahead = serializers.IntegerField()
    running = serializers.IntegerField(help_text="jobs running on that hardware now")
    estimated_start_s = serializers.FloatField(allow_null=True, help_text=(
        "seconds from now, estimated; null without finished jobs to estimate from"))
    estimate_basis = serializers.CharField()


class HiddenTallyOut(serializers.Serializer[Any]):
    shapes = serializers.IntegerField()
    evaluated = serializers.IntegerField(help_text="0 until the hidden tier is released")
    passed = serializers.IntegerField()
    held = serializers.BooleanField(help_text=(
        "the hidden shapes began and are not released yet: nothing of them, nor the job's "
        "end, is shown before a release time fixed when they began (docs/teams.md)"))


# "source" is an attribute of DRF's Field (as its type stubs read it): named in the data
@with_fields(source=serializers.CharField())
class JobOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    operator = serializers.CharField()
    queue = QueuePlaceOut(allow_null=True, required=False, help_text=(
        "a queued job's place in its hardware's queue; null otherwise"))
    dsl = serializers.CharField(help_text="the DSL the team declared for this file")
    status = serializers.ChoiceField(choices=EvaluationJob.Status.choices)
    mode = serializers.ChoiceField(choices=EvaluationJob.Mode.choices, help_text=(
        "where the worker ran it: gpu, or cpu-interpreter (Triton's interpreter: an "
        "interpreter check, no time measured, never ranked); empty until a worker reported"))
    attempts = serializers.IntegerField()
    shapes_done = serializers.IntegerField(help_text="reported shapes; the hidden ones "
                                           "count from the hidden tier's release on")
    shapes_total = serializers.IntegerField(help_text="the shapes the job covers, its hidden "
                                            "ones included")
    hidden_shapes = HiddenTallyOut(allow_null=True, required=False, help_text=(
        "the release's hidden shapes this job covers: how many, never which; null for none"))
    error = serializers.CharField()
    sha256 = serializers.CharField()
    heartbeat_at = serializers.DateTimeField(allow_null=True, help_text=(
        "the worker's last sign of life; while hidden shapes are held, the moment they began"))
    results = ResultOut(many=True)


# submissions.selectors.submission_outcome: the status refined by the shapes' results.
OUTCOME_STATUSES = ["queued", "running", "scored", "failed", "cancelled", "lost", "empty"]


class OutcomeOut(serializers.Serializer[Any]):
    """What happened, in shapes (submissions.selectors.submission_outcome)."""

    status = serializers.ChoiceField(choices=OUTCOME_STATUSES, help_text=(
        "scored: at least one shape correct; failed: every job ended and no shape was "
        "correct; cancelled / lost (infrastructure failure): ended before any shape was "
        "evaluated; queued, running, empty: as the submission's status"))
    summary = serializers.CharField(help_text='one line, e.g. "failed: 0 of 14 shapes correct"')
    shapes = serializers.IntegerField(help_text="shapes the jobs cover")
    evaluated = serializers.IntegerField(help_text="shapes reported so far")
    correct = serializers.IntegerField(help_text="shapes that compiled and matched the reference")
    native = serializers.IntegerField(help_text="correct shapes run by the candidate's own DSL "
                                      "kernels")
    interpreter = serializers.BooleanField(help_text=(
        "a job ran in Triton's CPU interpreter: an interpreter check, not a verdict on the "
        "kernel (no time, never ranked, no daily quota used)"))
    check = serializers.BooleanField(help_text="submitted in check mode: never ranked")


class ReleaseRefOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.IntegerField()


class SubmissionOut(serializers.Serializer[Any]):
    """A submission as its team (or an admin) sees it: submissions.selectors.submission_detail."""

    id = serializers.IntegerField()
    team = serializers.CharField()
    release = ReleaseRefOut()
    hardware = serializers.CharField()
    agent = serializers.CharField()
    model = serializers.CharField()
    output_tokens = serializers.IntegerField(allow_null=True)
    harness = serializers.CharField(help_text="the agent harness that made it (upload field "
                                    "harness), e.g. claude-code, codex, atrex-loop")
    input_tokens = serializers.IntegerField(allow_null=True, help_text="tokens the agent read")
    notes = serializers.CharField()
    created_at = serializers.DateTimeField()
    mode = serializers.ChoiceField(choices=Submission.Mode.choices, help_text=(
        "ranked, or check: evaluated like a ranked one but kept off every board, export and "
        "analysis"))
    status = serializers.ChoiceField(choices=SUBMISSION_STATUSES, help_text=(
        "the jobs' state (kept for compatibility: \"scored\" even when no shape was correct; "
        "read `outcome` for what happened)"))
    outcome = OutcomeOut()
    jobs = JobOut(many=True)


class SubmissionScoreOut(serializers.Serializer[Any]):
    """The submission's score under the active weights (see _active_score)."""

    weights_version = serializers.IntegerField()
    ranked = serializers.BooleanField(help_text="false while a result is quarantined, and "
                                      "always for a check submission")
    aggregate = serializers.FloatField(allow_null=True)
    unweighted_mean = serializers.FloatField(allow_null=True)
    memory = serializers.FloatField(allow_null=True)
    compute = serializers.FloatField(allow_null=True)
    prefill = serializers.FloatField(allow_null=True)
    decode = serializers.FloatField(allow_null=True)
    by_operator = serializers.DictField(child=serializers.FloatField(allow_null=True))
    hidden_by_operator = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="S_op over the release's hidden shapes, per operator that has them")
    not_generalising = serializers.ListField(
        child=serializers.CharField(), help_text="operators flagged \"does not generalise\": "
        "a hidden shape failed, fell back or was not evaluated where its public sibling "
        "passed, or its attainment with the launch floor is below its sibling's / the "
        "release's generalisation factor")
    generalisation = serializers.DictField(
        child=serializers.DictField(child=serializers.FloatField(allow_null=True)),
        help_text="per operator with hidden shapes: {public, hidden}, the medians of "
                  "min(1, (SOL + launch floor) / T) over each tier")
    generalisation_reasons = serializers.DictField(
        child=serializers.ListField(child=serializers.DictField()), required=False,
        help_text="per flagged operator, each hidden shape that flagged it: hidden_shape (its "
                  "number, never its id), public_shape (the public sibling it was compared "
                  "with), hidden and public (attainment with the launch floor; 0 where the "
                  "shape scored 0), hidden_state, public_state, why (failed, fell back, not "
                  "evaluated, below) and factor")
    excluded = serializers.BooleanField(help_text="taken off the ranks by an admin")
    correctness_rate = serializers.FloatField()
    dsl_adoption_rate = serializers.FloatField()
    computed_at = serializers.DateTimeField()
    current = serializers.BooleanField(help_text="computed after every scored job ended")


class SubmissionDetailOut(SubmissionOut):
    score = SubmissionScoreOut(allow_null=True)


class QuotaOut(serializers.Serializer[Any]):
    team = serializers.CharField()
    daily_limit = serializers.IntegerField()
    used_today = serializers.IntegerField()
    remaining_today = serializers.IntegerField()
    resets_at = serializers.DateTimeField()
    concurrent_limit = serializers.IntegerField()
    active = serializers.IntegerField()
    check_limit = serializers.IntegerField(help_text="check submissions a day")
    checks_today = serializers.IntegerField()
    remaining_checks = serializers.IntegerField()


class SubmissionListCreateApi(APIView):
    parser_classes = [MultiPartParser]  # a file can only be sent as multipart/form-data
    throttle_classes = [UploadThrottle]  # POSTs only: listing is not uploading

    def throttled(self, request: Request, wait: float | None) -> NoReturn:
        # Says which limit: a used-up daily quota answers 429 too (services.QuotaExceeded).
        raise Throttled(wait=wait, detail="Too many uploads.")

    @extend_schema(responses={200: SubmissionOut(many=True), **errors(403)},
                   operation_id="submissions_list")
    def get(self, request: ViewerApiRequest) -> Response:
        _require_principal(request)
        viewer = request.viewer
        submissions = submissions_visible(viewer).order_by("-created_at")[:100]
        return Response([_detail_out(s, admin=viewer.admin) for s in submissions])

    # The upload page parses the same fields with the same form.
    @extend_schema(
        request={"multipart/form-data": form_schema(SubmissionForm)},
        parameters=[OpenApiParameter(
            "Idempotency-Key", str, OpenApiParameter.HEADER, required=False, description=(
                "any string of at most 100 characters, new for each new upload: a POST "
                "repeated with the same key and the same upload (after a lost answer) answers "
                "200 with the submission the first one made, charging no quota again; the same "
                "key with a different upload answers 409"))],
        responses={201: SubmissionOut, 200: SubmissionOut, **errors(400, 403, 404, 409)})
    def post(self, request: ViewerApiRequest) -> Response:
        team = acting_team(request)
        form = SubmissionForm(request.data, request.FILES)
        if not form.is_valid():
            raise serializers.ValidationError(form.errors_by_field())
        mode = form.cleaned_data["mode"]
        require_scope(request, TokenScope.FULL if mode == MODE_RANKED else TokenScope.CHECK,
                      f"a {mode} submission")
        submission, replayed = submission_create_once(
            team=team, user=request.user, fields=form.cleaned_data,
            idempotency_key=request.headers.get("Idempotency-Key", ""))
        if not replayed:
            audit_token_use(request, action="submission.create",
                            target=f"submission:{submission.pk}", after={"mode": mode})
        response = Response(_detail_out(submission, admin=request.viewer.admin),
                            status=status.HTTP_200_OK if replayed else status.HTTP_201_CREATED)
        if replayed:
            response["Idempotent-Replayed"] = "true"
        return response


def _require_principal(request: ViewerApiRequest) -> None:
    """401 without credentials; other teams' submissions then answer 404, not 403."""
    if not request.viewer.admin:
        acting_team(request)


WAIT_POLL_S = 0.5


class WaitIn(serializers.Serializer[Any]):
    wait = serializers.FloatField(required=False, min_value=0, help_text=(
        "long poll: answer as soon as the evaluation has settled (every job ended, its score "
        "computed), or after this many seconds (at most 60, the deployment's "
        "ATREX_LONG_POLL_MAX_SECONDS), whichever first"))


class SubmissionDetailApi(APIView):
    @extend_schema(parameters=[WaitIn], responses={200: SubmissionDetailOut, **errors(400, 403, 404)})
    def get(self, request: ViewerApiRequest, pk: int) -> Response:
        _require_principal(request)
        submission = visible_submission(request, pk)
        query = WaitIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        deadline = time.monotonic() + min(query.validated_data.get("wait", 0.0),
                                          float(settings.ATREX_LONG_POLL_MAX_SECONDS))
        # Polling the database here rather than the client polling the portal: one request
        # per evaluation instead of one a second (sleeps hold no database connection open
        # beyond the request's own).
        while time.monotonic() < deadline and not submission_settled(submission):
            time.sleep(min(WAIT_POLL_S, max(0.0, deadline - time.monotonic())))
        return Response({**_detail_out(submission, admin=request.viewer.admin),
                         "score": active_score(submission)})


class SubmissionCancelApi(APIView):
    @extend_schema(request=None, responses={200: SubmissionOut, **errors(403, 404)})
    def post(self, request: ViewerApiRequest, pk: int) -> Response:
        _require_principal(request)
        submission = visible_submission(request, pk)
        require_scope(request, TokenScope.CHECK if submission.is_check else TokenScope.FULL,
                      f"cancelling a {submission.mode} submission")
        for job in EvaluationJob.objects.filter(candidate__submission=submission):
            job_cancel(job=job)
        audit_token_use(request, action="submission.cancel", target=f"submission:{submission.pk}")
        return Response(_detail_out(submission, admin=request.viewer.admin))


class TokenOut(serializers.Serializer[Any]):
    team = serializers.CharField()
    name = serializers.CharField(help_text="the token's name on the team page")
    prefix = serializers.CharField()
    scope = serializers.ChoiceField(choices=TokenScope.choices, help_text=(
        "read: reads only; check: also check submissions, ncu profiles, cancelling checks; "
        "full: also ranked submissions"))
    created_at = serializers.DateTimeField()


class TokenApi(APIView):
    """Which team and scope the request's token stands for (a client checks its token, an MCP
    server authenticates its callers with it)."""

    @extend_schema(responses={200: TokenOut, **errors(403)})
    def get(self, request: ViewerApiRequest) -> Response:
        token = request_token(request)
        if token is None and request.user.is_authenticated:
            raise PermissionDenied("signed in on the pages, not with a team token")
        if token is None:
            raise NotAuthenticated("send a team token: Authorization: Bearer atx_...")
        return Response(TokenOut({"team": token.team.name, "name": token.name,
                                  "prefix": token.prefix, "scope": token.scope,
                                  "created_at": token.created_at}).data)


class QuotaApi(APIView):
    @extend_schema(responses={200: QuotaOut, **errors(403)})
    def get(self, request: ViewerApiRequest) -> Response:
        team = acting_team(request)
        quota = quota_status(team)
        return Response({"team": team.name, "daily_limit": quota.daily_limit,
                         "used_today": quota.used_today, "remaining_today": quota.remaining_today,
                         "resets_at": quota.resets_at.isoformat(),
                         "concurrent_limit": quota.concurrent_limit, "active": quota.active,
                         "check_limit": quota.check_limit, "checks_today": quota.checks_today,
                         "remaining_checks": quota.remaining_checks})


class KernelOut(serializers.Serializer[Any]):
    name = serializers.CharField()
    category = serializers.CharField(help_text="dsl (the candidate's own, in its declared "
                                     "DSL), other-dsl (its own, in another DSL), torch, vendor "
                                     "or compiled")
    dsl = serializers.CharField(allow_null=True, required=False,
                                help_text="for other-dsl: the DSL the kernel is written in")
    launches = serializers.IntegerField(allow_null=True)
    device_time_s = serializers.FloatField(allow_null=True)
    share = serializers.FloatField(allow_null=True, help_text="of the observed forward's device "
                                   "time")


class ClocksOut(serializers.Serializer[Any]):
    sm_mhz = serializers.IntegerField(allow_null=True)
    memory_mhz = serializers.IntegerField(allow_null=True)


class EnvironmentOut(serializers.Serializer[Any]):
    gpu = serializers.CharField(allow_null=True)
    driver = serializers.CharField(allow_null=True)
    cuda = serializers.CharField(allow_null=True)
    torch = serializers.CharField()
    dsl = serializers.CharField()
    dsl_version = serializers.CharField(allow_null=True)
    clocks_before = ClocksOut(required=False, help_text="before the timing stage (NVML)")
    clocks_after = ClocksOut(required=False, help_text="after the timing stage (NVML)")


class ShapeProfileOut(serializers.Serializer[Any]):
    shape_id = serializers.CharField()
    status = serializers.CharField()
    failed_stage = serializers.CharField()
    verdict = serializers.CharField()
    dsl_ratio = serializers.FloatField(allow_null=True)
    median_s = serializers.FloatField(allow_null=True)
    p10_s = serializers.FloatField(allow_null=True)
    p90_s = serializers.FloatField(allow_null=True)
    samples = serializers.IntegerField(allow_null=True)
    launch_method = serializers.CharField()
    wall_median_s = serializers.FloatField(allow_null=True, help_text=(
        "the end-to-end wall time of one call (CUDA events around it, no profiler)"))
    busy_median_s = serializers.FloatField(allow_null=True, help_text=(
        "the union of the kernels' intervals: reported, never scored"))
    scored_as = serializers.CharField(allow_null=True, help_text=(
        "span: median_s is the device span of one forward (older results: busy)"))
    span_measured_by = serializers.CharField(allow_null=True, help_text=(
        "profiler (device records: graph replay, or eager work CUDA events cannot see) or "
        "events (eager: CUDA events of uninstrumented calls, bounded by the profiled busy "
        "time and span)"))
    environment = EnvironmentOut(allow_null=True)
    kernels_per_forward = serializers.FloatField(allow_null=True)
    attainment = serializers.FloatField(allow_null=True)
    attainment_with_floor = serializers.FloatField(allow_null=True)
    suspicious = serializers.BooleanField()
    kernels = KernelOut(many=True)
    kernel_time_s = serializers.FloatField(allow_null=True)
    bound = serializers.CharField(allow_null=True, help_text="memory, compute or balanced")
    bandwidth_fraction = serializers.FloatField(allow_null=True)
    bandwidth_bytes_per_s = serializers.FloatField(allow_null=True)
    flop_rate_fraction = serializers.FloatField(allow_null=True)
    flop_rate_per_s = serializers.FloatField(allow_null=True)
    peak_path = serializers.CharField(allow_null=True)


class OperatorProfileOut(serializers.Serializer[Any]):
    operator = serializers.CharField()
    job_status = serializers.CharField()
    job_mode = serializers.CharField()
    shapes = ShapeProfileOut(many=True)


class HardwarePeaksOut(serializers.Serializer[Any]):
    name = serializers.CharField()
    hbm_bytes_per_s = serializers.FloatField()
    peak_flops = serializers.DictField(child=serializers.FloatField())
    launch_floor_s = serializers.FloatField()


class ProfileOut(serializers.Serializer[Any]):
    """submissions.profile.submission_profile: per shape, what ran and how close it came."""

    schema = serializers.CharField()
    submission = serializers.IntegerField()
    mode = serializers.CharField()
    hardware = HardwarePeaksOut()
    notes = serializers.ListField(child=serializers.CharField())
    operators = OperatorProfileOut(many=True)


class SubmissionProfileApi(APIView):
    @extend_schema(responses={200: ProfileOut, **errors(403, 404)})
    def get(self, request: ViewerApiRequest, pk: int) -> Response:
        _require_principal(request)
        return Response(_profile_out(submission_profile(visible_submission(request, pk))))


class NcuKernelOut(serializers.Serializer[Any]):
    """One kernel launch as ncu counted it (evaluation.harness.ncu.profile.KernelCounters)."""

    launch = serializers.IntegerField(help_text="ncu's ID: the order of the profiled launches")
    name = serializers.CharField()
    duration_s = serializers.FloatField(allow_null=True, help_text="ncu's own, one replay: "
                                        "never scored")
    dram_read_bytes = serializers.FloatField(allow_null=True)
    dram_write_bytes = serializers.FloatField(allow_null=True)
    dram_bytes_per_s = serializers.FloatField(allow_null=True)
    dram_of_peak = serializers.FloatField(allow_null=True, help_text="against the hardware "
                                          "profile's HBM peak, 0-1")
    dram_throughput_pct = serializers.FloatField(allow_null=True)
    achieved_occupancy_pct = serializers.FloatField(allow_null=True)
    sm_throughput_pct = serializers.FloatField(allow_null=True)
    tensor_pipe_pct = serializers.FloatField(allow_null=True)
    l2_hit_rate_pct = serializers.FloatField(allow_null=True)
    limited_by = serializers.CharField(help_text='"DRAM", "SM (compute)", "L2", "L1/shared" '
                                       'or "latency"')
    sm_clock_hz = serializers.FloatField(allow_null=True)
    dram_clock_hz = serializers.FloatField(allow_null=True)


class NcuProfileOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    submission = serializers.IntegerField()
    operator = serializers.CharField()
    shape = serializers.CharField()
    status = serializers.ChoiceField(choices=NcuProfile.Status.choices)
    error = serializers.CharField(help_text="why there are no kernels, when there are none")
    kernels = NcuKernelOut(many=True)
    clocks = serializers.DictField(child=serializers.FloatField(allow_null=True), help_text=(
        "the SM and DRAM clocks ncu saw (it leaves them as they are: --clock-control none)"))
    seconds = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class NcuProfileIn(serializers.Serializer[Any]):
    operator = serializers.CharField()
    shape = serializers.CharField(help_text="a public shape id the candidate's job covered")


class SubmissionNcuApi(APIView):
    """Nsight Compute profiles of one shape of the submission (the team's own; a daily quota)."""

    parser_classes = [JSONParser, FormParser, MultiPartParser]  # the CLI sends a form

    @extend_schema(responses={200: NcuProfileOut(many=True), **errors(403, 404)})
    def get(self, request: ViewerApiRequest, pk: int) -> Response:
        _require_principal(request)
        return Response(ncu_profiles_of(visible_submission(request, pk)))

    @extend_schema(request=NcuProfileIn,
                   responses={202: NcuProfileOut, **errors(400, 403, 404, 429)})
    def post(self, request: ViewerApiRequest, pk: int) -> Response:
        _require_principal(request)
        submission = visible_submission(request, pk)
        if not request.viewer.admin and request.viewer.team != submission.team:
            raise PermissionDenied("only the submission's team may profile it")
        data = NcuProfileIn(data=request.data)
        data.is_valid(raise_exception=True)
        profile = ncu_profile_request(submission=submission, operator=data.validated_data[
            "operator"], shape_id=data.validated_data["shape"], user=request.user)
        audit_token_use(request, action="ncu.request", target=f"submission:{submission.pk}",
                        after={"profile": profile.pk, **data.validated_data})
        return Response(ncu_profile_detail(profile), status=202)
