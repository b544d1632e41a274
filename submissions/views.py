"""Team pages: team (members, tokens, quota, submissions), upload, submission detail."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from evaluation.catalog.models import HardwareProfile, Release
from evaluation.harness.dsl import DSL_LABELS, KNOWN_DSLS
from portal.accounts.auth import is_admin, request_team
from portal.accounts.models import ApiToken, invite_create, token_create
from portal.accounts.viewer import viewer_of
from portal.errors import DomainError
from portal.htmx import HtmxRequest
from portal.throttles import limited_posts
from submissions.forms import (
    ResultReviewForm,
    ShareLinksForm,
    SubmissionForm,
    SubmissionShareForm,
    TokenCreateForm,
    TokenRevokeForm,
    WebhookForm,
    form_or_400,
)
from submissions.models import MODE_RANKED, ShapeResult
from submissions.ncu import ncu_profile_request, ncu_profiles_of
from submissions.profile import submission_profile
from submissions.selectors import quarantined_results, recent_submissions, submission_detail
from submissions.services import quota_status, shape_result_review, submission_from_upload
from submissions.sharing import (
    SharingDisabled,
    share_links_set,
    shared_submission,
    shared_summary,
    submission_share,
    submission_unshare,
)
from submissions.throttles import UploadThrottle
from submissions.upload import UploadRejected
from submissions.visibility import visible_submission
from submissions.webhooks import (
    WebhookRejected,
    team_webhook_rotate_secret,
    team_webhook_set,
    test_delivery_queue,
)


@login_required
@require_http_methods(["GET", "POST"])
def team_page(request: HttpRequest) -> HttpResponse:
    """A team's page; for a user in no team (an admin, often) a landing page that says so,
    with every team's recent submissions for admins."""
    team = request_team(request)
    if team is None:  # nothing to change (tokens belong to a team): 403 for a POST
        return render(request, "submissions/no_team.html", {
            "admin": is_admin(request), "submissions": recent_submissions(viewer_of(request))},
            status=403 if request.method == "POST" else 200)
    new_token, settings_error, test_sent = None, None, None
    if request.method == "POST":
        # Each of the page's forms posts its own field: which one came says what to do.
        if "revoke" in request.POST:
            revoke = form_or_400(TokenRevokeForm(request.POST))["revoke"]
            ApiToken.objects.filter(team=team, pk=revoke).update(revoked_at=timezone.now())
        elif request.POST.get("token_name"):
            name = form_or_400(TokenCreateForm(request.POST))["token_name"]
            _, new_token = token_create(team=team, name=name, created_by=request.user)
        elif "share_links" in request.POST:
            share = ShareLinksForm(request.POST)
            form_or_400(share)
            share_links_set(team=team, enabled=share.enabled, actor=request.user)
        elif "webhook_url" in request.POST:
            webhook = WebhookForm(request.POST)
            try:
                if not webhook.is_valid():
                    raise WebhookRejected(f"webhook_url: {webhook.errors['webhook_url'][0]}")
                team_webhook_set(team=team, url=webhook.cleaned_data["webhook_url"],
                                 actor=request.user)
            except WebhookRejected as exc:
                settings_error = str(exc)
        elif "webhook_rotate" in request.POST:
            team_webhook_rotate_secret(team=team, actor=request.user)
        elif "webhook_test" in request.POST:
            try:
                test_sent = test_delivery_queue(team=team, actor=request.user)
            except WebhookRejected as exc:
                settings_error = str(exc)
        elif "invite_create" in request.POST:
            invite_create(team=team, created_by=request.user)
    return render(request, "submissions/team.html", {
        "team": team, "members": team.members.order_by("username"),
        "tokens": team.tokens.order_by("-created_at"), "new_token": new_token,
        "settings_error": settings_error, "test_sent": test_sent,
        "webhook_url": request.POST.get("webhook_url", team.webhook_url)
        if settings_error else team.webhook_url,
        "quota": quota_status(team), "submissions": recent_submissions(viewer_of(request)),
        "invites": team.invites.filter(revoked_at__isnull=True, expires_at__gt=timezone.now())
        .order_by("-created_at")},
        status=400 if settings_error else 200)


@login_required
@require_http_methods(["GET", "POST"])
@limited_posts(UploadThrottle, "uploads")
def upload_page(request: HttpRequest) -> HttpResponse:
    team = request_team(request)
    if team is None:  # submissions belong to a team: say so rather than a 404
        return render(request, "submissions/upload.html", {"team": None,
                                                           "admin": is_admin(request)},
                      status=403 if request.method == "POST" else 200)
    # A rejected upload shows the fields as posted again (a file input cannot be refilled:
    # the page asks for the file again).
    form = SubmissionForm(request.POST, request.FILES) if request.method == "POST" else \
        SubmissionForm(initial={"hardware": "H200", "mode": request.GET.get("mode", MODE_RANKED),
                                "release": request.GET.get("release"),
                                "operator": request.GET.get("operator")})
    releases = list(Release.objects.order_by("name", "-version").prefetch_related("operators"))
    context: dict[str, Any] = {"team": team, "releases": releases,
                               # the operator list, one group per release: a single .py is
                               # evaluated as the chosen one, whatever its file is called
                               "release_operators": [(r, sorted(op.name for op in r.operators.all()))
                                                     for r in releases],
                               "hardware": HardwareProfile.objects.order_by("name"),
                               "quota": quota_status(team), "error": None, "form": form,
                               "dsl_names": KNOWN_DSLS,
                               "dsl_labels": ", ".join(f"{n} ({label})"
                                                       for n, label in DSL_LABELS.items())}
    if request.method != "POST":
        return render(request, "submissions/upload.html", context)
    try:
        if not form.is_valid():
            raise UploadRejected(form.first_error())
        submission = submission_from_upload(team=team, user=request.user, fields=form.cleaned_data)
    except DomainError as exc:
        context["error"] = str(exc)
        return render(request, "submissions/upload.html", context, status=exc.http_status)
    return redirect("submission", pk=submission.pk)


@login_required
def submission_page(request: HtmxRequest, pk: int) -> HttpResponse:
    submission = visible_submission(request, pk)
    detail = submission_detail(submission, admin=is_admin(request))
    live = detail["status"] in ("queued", "running")
    template = "submissions/submission.html"
    if request.htmx:
        template += "#progress"  # the live part only; htmx polls it while jobs run
    # Scores are the leaderboard's derived data, reached through the reverse relation.
    score = (submission.scores.filter(weight_set__active=True)
             .select_related("weight_set").first())
    response = render(request, template, {
        "submission": submission, "detail": detail, "score": score, "live": live,
        # Once every job has ended: per-shape sections a poll would close again.
        "profile": None if live else submission_profile(submission),
        "ncu_profiles": ncu_profiles_of(submission),
        "own": request_team(request) == submission.team,
        "share_url": request.build_absolute_uri(reverse("submission-shared",
                                                        args=[submission.share_token]))
        if submission.share_token else None})
    response["Vary"] = "HX-Request"
    return response


@login_required
@require_POST
def submission_share_page(request: HttpRequest, pk: int) -> HttpResponse:
    """The team's members give the submission a public link, or revoke it."""
    submission = visible_submission(request, pk)
    if request_team(request) != submission.team:
        raise PermissionDenied("only the submission's team can share it")
    if form_or_400(SubmissionShareForm(request.POST))["share"] == "create":
        try:
            submission_share(submission=submission, actor=request.user)
        except SharingDisabled as exc:
            raise BadRequest(str(exc)) from None
    else:
        submission_unshare(submission=submission, actor=request.user)
    return redirect(f"{reverse('submission', args=[submission.pk])}#share")


@login_required
@require_POST
def submission_ncu_page(request: HttpRequest, pk: int) -> HttpResponse:
    """The team asks for an ncu profile of one public shape (its own daily quota)."""
    submission = visible_submission(request, pk)
    if request_team(request) != submission.team:
        raise PermissionDenied("only the submission's team can profile it")
    operator, shape = request.POST.get("operator", ""), request.POST.get("shape", "")
    try:
        ncu_profile_request(submission=submission, operator=operator, shape_id=shape,
                            user=request.user)
    except DomainError as exc:
        return HttpResponse(str(exc), status=exc.http_status, content_type="text/plain")
    return redirect(f"{reverse('submission', args=[submission.pk])}#ncu")


def shared_submission_page(request: HttpRequest, token: str) -> HttpResponse:
    """A submission's public summary, by its share link (no sign-in): 404 once revoked."""
    submission = shared_submission(token)
    if submission is None:
        raise Http404("no such shared submission")
    response = render(request, "submissions/shared.html",
                      {"shared": shared_summary(submission)})
    # The token is the only key: no Referer carries it to a page linked from here, and
    # search engines leave the page out.
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    response["Cache-Control"] = "private, no-store"
    return response


@staff_member_required
@require_http_methods(["GET", "POST"])
def quarantine_page(request: HttpRequest) -> HttpResponse:
    """Admins: results quarantined as suspicious, with their evidence; accept or reject each
    (audited; the submission is rescored and ranked again once none is left)."""
    if request.method == "POST":
        review = form_or_400(ResultReviewForm(request.POST))
        result = get_object_or_404(ShapeResult.every_tier.select_related("job__candidate"),
                                   pk=review["result"], suspicious=True)
        shape_result_review(result=result, accept=review["decision"] == "accept",
                            actor=request.user)
        return redirect("quarantine")
    return render(request, "submissions/quarantine.html",
                  {"rows": quarantined_results(include_reviewed=True)})
