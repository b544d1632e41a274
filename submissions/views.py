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

from evaluation.models import HardwareProfile, Release
from portal.accounts.auth import is_admin, request_team
from portal.accounts.models import ApiToken, token_create
from portal.errors import DomainError
from portal.throttles import limited_posts
from submissions.models import MODE_RANKED, ShapeResult
from submissions.profile import submission_profile
from submissions.selectors import (
    quarantined_results,
    recent_submissions,
    submission_detail,
    submission_visible,
)
from submissions.services import (
    MAX_BIG_INTEGER,
    quota_status,
    shape_result_review,
    submission_create,
)
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
from submissions.webhooks import WebhookRejected, team_webhook_rotate_secret, team_webhook_set


def _posted_id(request: HttpRequest, name: str) -> int:
    """A row id from a form: 400 for anything but digits (a lookup by "abc" would be a 500),
    and for a number no id column holds (the database driver would overflow)."""
    value = request.POST.get(name, "")
    if not _is_whole_number(value) or int(value) > MAX_BIG_INTEGER:
        raise BadRequest(f"{name}: expected a number from 0 to {MAX_BIG_INTEGER}")
    return int(value)


def _is_whole_number(value: str) -> bool:
    # Length first: int() of thousands of digits is slow, and beyond 4300 a ValueError.
    return value.isascii() and value.isdigit() and len(value) <= len(str(MAX_BIG_INTEGER))


def _posted_tokens(request: HttpRequest) -> int | None:
    """The optional output-token count: empty is none; anything but digits is refused."""
    value = request.POST.get("output_tokens", "").strip()
    if not value:
        return None
    if not _is_whole_number(value):
        raise UploadRejected(f"output_tokens: expected a whole number from 0 to {MAX_BIG_INTEGER}")
    return int(value)


def _refuse_nul(request: HttpRequest) -> None:
    """No form field may hold NUL: PostgreSQL refuses it even in a lookup (a 500)."""
    for name, values in request.POST.lists():
        if any("\x00" in value for value in values):
            raise UploadRejected(f"{name}: text may not contain NUL characters")


@login_required
@require_http_methods(["GET", "POST"])
def team_page(request: HttpRequest) -> HttpResponse:
    """A team's page; for a user in no team (an admin, often) a landing page that says so,
    with every team's recent submissions for admins."""
    team = request_team(request)
    if team is None:  # nothing to change (tokens belong to a team): 403 for a POST
        return render(request, "submissions/no_team.html", {
            "admin": is_admin(request), "submissions": recent_submissions(request)},
            status=403 if request.method == "POST" else 200)
    new_token, settings_error = None, None
    if request.method == "POST":
        if "revoke" in request.POST:
            ApiToken.objects.filter(team=team, pk=_posted_id(request, "revoke")).update(
                revoked_at=timezone.now())
        elif request.POST.get("token_name"):
            _, new_token = token_create(team=team, name=request.POST["token_name"][:100],
                                        created_by=request.user)
        elif "share_links" in request.POST:
            share_links_set(team=team, enabled=request.POST["share_links"] == "on",
                            actor=request.user)
        elif "webhook_url" in request.POST:
            try:
                team_webhook_set(team=team, url=request.POST["webhook_url"], actor=request.user)
            except WebhookRejected as exc:
                settings_error = str(exc)
        elif "webhook_rotate" in request.POST:
            team_webhook_rotate_secret(team=team, actor=request.user)
    return render(request, "submissions/team.html", {
        "team": team, "members": team.members.order_by("username"),
        "tokens": team.tokens.order_by("-created_at"), "new_token": new_token,
        "settings_error": settings_error,
        "webhook_url": request.POST.get("webhook_url", team.webhook_url)
        if settings_error else team.webhook_url,
        "quota": quota_status(team), "submissions": recent_submissions(request)},
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
    context: dict[str, Any] = {"team": team,
                               "releases": Release.objects.order_by("name", "-version"),
                               "hardware": HardwareProfile.objects.order_by("name"),
                               "quota": quota_status(team), "error": None,
                               "form": _form_values(request)}
    if request.method == "POST":
        upload = request.FILES.get("file")
        try:
            if upload is None:
                raise UploadRejected("choose a .py, .zip or .tar.gz file to upload")
            _refuse_nul(request)
            release = get_object_or_404(Release, pk=_posted_id(request, "release"))
            hardware = get_object_or_404(HardwareProfile, name=request.POST.get("hardware"))
            submission = submission_create(
                team=team, user=request.user, release=release, hardware=hardware,
                filename=upload.name or "", data=upload.read(),
                operator=request.POST.get("operator") or None,
                # No cutting here: submission_create refuses a long field, as the API does.
                agent=request.POST.get("agent", ""),
                model_name=request.POST.get("model", ""),
                output_tokens=_posted_tokens(request),
                notes=request.POST.get("notes", ""),
                mode=request.POST.get("mode") or MODE_RANKED)
        except (DomainError, BadRequest) as exc:
            context["error"] = str(exc)
            status = exc.http_status if isinstance(exc, DomainError) else 400
            return render(request, "submissions/upload.html", context, status=status)
        return redirect("submission", pk=submission.pk)
    return render(request, "submissions/upload.html", context)


def _form_values(request: HttpRequest) -> dict[str, str]:
    """The upload form's fields as posted, so a rejected upload shows them again (a file
    input cannot be refilled: the page asks for the file again)."""
    names = ("release", "hardware", "operator", "agent", "model", "output_tokens", "notes",
             "mode")
    if request.method != "POST":
        return {"hardware": "H200", "mode": request.GET.get("mode", MODE_RANKED)}
    return {name: request.POST.get(name, "") for name in names}


@login_required
def submission_page(request: HttpRequest, pk: int) -> HttpResponse:
    submission = submission_visible(request, pk)
    detail = submission_detail(request, submission)
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
    submission = submission_visible(request, pk)
    if request_team(request) != submission.team:
        raise PermissionDenied("only the submission's team can share it")
    action = request.POST.get("share")
    if action == "create":
        try:
            submission_share(submission=submission, actor=request.user)
        except SharingDisabled as exc:
            raise BadRequest(str(exc)) from None
    elif action == "revoke":
        submission_unshare(submission=submission, actor=request.user)
    else:
        raise BadRequest("share: expected create or revoke")
    return redirect(f"{reverse('submission', args=[submission.pk])}#share")


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
        result = get_object_or_404(ShapeResult.objects.select_related("job__candidate"),
                                   pk=_posted_id(request, "result"), suspicious=True)
        shape_result_review(result=result, accept=request.POST.get("decision") == "accept",
                            actor=request.user)
        return redirect("quarantine")
    return render(request, "submissions/quarantine.html",
                  {"rows": quarantined_results(include_reviewed=True)})
