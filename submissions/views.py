"""Team pages: team (members, tokens, quota, submissions), upload, submission detail."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from evaluation.catalog.capability import portal_capability
from evaluation.harness.dsl import DSL_LABELS, KNOWN_DSLS
from leaderboard.submission_scores import active_score, active_weights_score, with_active_aggregates
from portal.accounts.models import (
    MAX_INVITE_USES,
    Team,
    TokenScope,
    invite_create,
    invite_revoke,
    token_create,
    token_revoke,
)
from portal.accounts.viewer import ViewerRequest
from portal.errors import DomainError
from portal.forms import first_error
from portal.throttles import limited_posts
from submissions.forms import (
    InviteCreateForm,
    InviteRevokeForm,
    ResultReviewForm,
    ShareLinksForm,
    SubmissionForm,
    SubmissionShareForm,
    TokenCreateForm,
    TokenRevokeForm,
    WebhookForm,
    form_or_400,
)
from submissions.models import EvaluationJob, ShapeResult
from submissions.ncu import ncu_available, ncu_profile_request, ncu_profiles_of
from submissions.profile import submission_profile
from submissions.selectors import (
    iteration_links,
    quarantined_results,
    recent_submissions,
    submission_detail,
    team_operators,
    upload_choices,
)
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


@dataclass(frozen=True)
class TeamPosted:
    """What one of the team page's forms led to, for the page shown after it."""

    new_token: str | None = None  # shown once
    settings_error: str | None = None  # the sharing and notifications forms' refusal
    test_sent: str | None = None  # a test delivery's id


def _revoke_token(request: ViewerRequest, team: Team) -> TeamPosted:
    token = form_or_400(TokenRevokeForm(request.POST))["revoke"]
    token_revoke(team=team, token_id=token, actor=request.user)
    return TeamPosted()


def _create_token(request: ViewerRequest, team: Team) -> TeamPosted:
    data = form_or_400(TokenCreateForm(request.POST))
    return TeamPosted(new_token=token_create(team=team, name=data["token_name"],
                                             created_by=request.user,
                                             scope=data["token_scope"])[1])


def _set_share_links(request: ViewerRequest, team: Team) -> TeamPosted:
    share = ShareLinksForm(request.POST)
    form_or_400(share)
    share_links_set(team=team, enabled=share.enabled, actor=request.user)
    return TeamPosted()


def _set_webhook(request: ViewerRequest, team: Team) -> TeamPosted:
    webhook = WebhookForm(request.POST)
    try:
        if not webhook.is_valid():
            raise WebhookRejected(first_error(webhook))
        team_webhook_set(team=team, url=webhook.cleaned_data["webhook_url"], actor=request.user)
    except WebhookRejected as exc:
        return TeamPosted(settings_error=str(exc))
    return TeamPosted()


def _rotate_webhook_secret(request: ViewerRequest, team: Team) -> TeamPosted:
    team_webhook_rotate_secret(team=team, actor=request.user)
    return TeamPosted()


def _test_webhook(request: ViewerRequest, team: Team) -> TeamPosted:
    try:
        return TeamPosted(test_sent=test_delivery_queue(team=team, actor=request.user))
    except WebhookRejected as exc:
        return TeamPosted(settings_error=str(exc))


def _create_invite(request: ViewerRequest, team: Team) -> TeamPosted:
    uses = form_or_400(InviteCreateForm(request.POST))["invite_uses"] or 1
    invite_create(team=team, created_by=request.user, max_uses=uses)
    return TeamPosted()


def _revoke_invite(request: ViewerRequest, team: Team) -> TeamPosted:
    invite = form_or_400(InviteRevokeForm(request.POST))["invite_revoke"]
    invite_revoke(team=team, invite_id=invite, actor=request.user)
    return TeamPosted()


# The team page's forms, each named by the field only it posts (its button or input); the
# first one posted is done. An empty token name creates nothing (the page requires one).
TEAM_PAGE_ACTIONS: tuple[tuple[str, Callable[[ViewerRequest, Team], TeamPosted]], ...] = (
    ("revoke", _revoke_token), ("token_name", _create_token),
    ("share_links", _set_share_links), ("webhook_url", _set_webhook),
    ("webhook_rotate", _rotate_webhook_secret), ("webhook_test", _test_webhook),
    ("invite_create", _create_invite), ("invite_revoke", _revoke_invite),
)


def team_page_action(post: QueryDict) -> Callable[[ViewerRequest, Team], TeamPosted] | None:
    for field, action in TEAM_PAGE_ACTIONS:
        if post.get(field) if field == "token_name" else field in post:
            return action
    return None


@login_required
@require_http_methods(["GET", "POST"])
def team_page(request: ViewerRequest) -> HttpResponse:
    """A team's page; for a user in no team (an admin, often) a landing page that says so,
    with every team's recent submissions for admins."""
    team = request.viewer.team
    if team is None:  # nothing to change (tokens belong to a team): 403 for a POST
        return render(request, "submissions/no_team.html", {
            "admin": request.viewer.admin,
            "submissions": with_active_aggregates(recent_submissions(request.viewer))},
            status=403 if request.method == "POST" else 200)
    action = team_page_action(request.POST) if request.method == "POST" else None
    posted = action(request, team) if action is not None else TeamPosted()
    new_token, settings_error, test_sent = posted.new_token, posted.settings_error, posted.test_sent
    return render(request, "submissions/team.html", {
        "team": team, "members": team.members.order_by("username"),
        "tokens": team.tokens.order_by("-created_at"), "new_token": new_token,
        "token_scopes": TokenScope.choices,
        "settings_error": settings_error, "test_sent": test_sent,
        "webhook_url": request.POST.get("webhook_url", team.webhook_url)
        if settings_error else team.webhook_url,
        "quota": quota_status(team),
        "submissions": with_active_aggregates(recent_submissions(request.viewer)),
        "history_operators": team_operators(team),
        "invites": team.invites.usable().order_by("-created_at"),
        "max_invite_uses": MAX_INVITE_USES},
        status=400 if settings_error else 200)


@login_required
@require_http_methods(["GET", "POST"])
@limited_posts(UploadThrottle, "uploads")
def upload_page(request: ViewerRequest) -> HttpResponse:
    team = request.viewer.team
    if team is None:  # submissions belong to a team: say so rather than a 404
        return render(request, "submissions/upload.html", {"team": None,
                                                           "admin": request.viewer.admin},
                      status=403 if request.method == "POST" else 200)
    capability = portal_capability()
    choices = upload_choices(capability, release=request.GET.get("release"))
    # A rejected upload shows the fields as posted again (a file input cannot be refilled:
    # the page asks for the file again). The defaults are what this portal can evaluate.
    form = SubmissionForm(request.POST, request.FILES) if request.method == "POST" else \
        SubmissionForm(initial={"hardware": choices.hardware, "release": choices.release,
                                "mode": request.GET.get("mode", choices.mode),
                                "operator": request.GET.get("operator")})
    context: dict[str, Any] = {"team": team, "choices": choices, "capability": capability,
                               "quota": quota_status(team), "error": None, "error_field": "",
                               "form": form, "dsl_names": KNOWN_DSLS,
                               "dsl_labels": ", ".join(f"{n} ({label})"
                                                       for n, label in DSL_LABELS.items())}
    if request.method != "POST":
        return render(request, "submissions/upload.html", context)
    try:
        if not form.is_valid():
            field = next(iter(form.errors))
            raise UploadRejected(f"{field}: {form.errors[field][0]}" if field != "__all__"
                                 else first_error(form))
        submission = submission_from_upload(team=team, user=request.user, fields=form.cleaned_data)
    except DomainError as exc:
        context["error"] = str(exc)
        context["error_field"] = upload_error_field(str(exc))
        return render(request, "submissions/upload.html", context, status=exc.http_status)
    return redirect("submission", pk=submission.pk)


# The upload form's fields an error message can name first ("dsl: ...").
_UPLOAD_FIELDS = ("release", "hardware", "operator", "dsl", "mode", "agent", "model",
                  "output_tokens", "notes")


def upload_error_field(message: str) -> str:
    """The form field a refusal is about, so the page shows it there: the one its message
    starts with, the operator for an unknown operator, else the file."""
    head = message.split(":", 1)[0].strip()
    if head in _UPLOAD_FIELDS:
        return head
    if "no operator named" in message or "has no shape" in message:
        return "operator" if "no operator named" in message else "release"
    if message.startswith("This portal"):
        return "release"
    return "file"


@login_required
def submission_page(request: ViewerRequest, pk: int) -> HttpResponse:
    submission = visible_submission(request, pk)
    detail = submission_detail(submission, admin=request.viewer.admin)
    live = detail["status"] in EvaluationJob.Status.active()
    template = "submissions/submission.html"
    if request.htmx:
        template += "#progress"  # the live part only; htmx polls it while jobs run
    score = active_weights_score(submission)
    response = render(request, template, {
        "submission": submission, "detail": detail, "score": score, "live": live,
        # Once every job has ended: per-shape sections a poll would close again.
        "profile": None if live else submission_profile(submission),
        "ncu_profiles": ncu_profiles_of(submission),
        "ncu_available": None if request.htmx else ncu_available(submission),
        # Outside the live part: a poll does not read them.
        "iteration": None if request.htmx else iteration_links(request.viewer, submission),
        "own": request.viewer.team == submission.team,
        "share_url": request.build_absolute_uri(reverse("submission-shared",
                                                        args=[submission.share_token]))
        if submission.share_token else None})
    response["Vary"] = "HX-Request"
    return response


@login_required
@require_POST
def submission_share_page(request: ViewerRequest, pk: int) -> HttpResponse:
    """The team's members give the submission a public link, or revoke it."""
    submission = visible_submission(request, pk)
    if request.viewer.team != submission.team:
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
def submission_ncu_page(request: ViewerRequest, pk: int) -> HttpResponse:
    """The team asks for an ncu profile of one public shape (its own daily quota)."""
    submission = visible_submission(request, pk)
    if request.viewer.team != submission.team:
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
                      {"shared": shared_summary(submission, score=active_score(submission))})
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
