"""Public links to a submission's summary: opt-in per team, one unguessable token per shared
submission, revocable.

A shared summary shows what a board would show of the submission and its shapes: outcome,
scores, per shape the status, verdict, DSL ratio, time and attainment. Never the source,
error messages (a traceback quotes the source), kernel names, notes or anything from the
hidden release files (SOL, W, Q, provenance).
"""

from __future__ import annotations

import secrets
from typing import Any

from django.db import transaction
from django.db.models import F

from portal.accounts.models import Team
from portal.audit.models import audit
from portal.errors import DomainError
from submissions.models import EvaluationJob, ShapeResult, Submission
from submissions.selectors import submission_outcomes, submission_status

TOKEN_BYTES = 24  # 192 bits, URL-safe base64: 32 characters
SHARED_RESULT_FIELDS = ("status", "failed_stage", "verdict", "dsl_ratio", "median_s",
                        "wall_time_s", "attainment", "suspicious")
SHARED_SCORE_FIELDS = ("weights_version", "ranked", "complete", "aggregate", "unweighted_mean",
                       "memory", "compute", "prefill", "decode", "correctness_rate",
                       "dsl_adoption_rate", "by_operator")


class SharingDisabled(DomainError):
    """The team has not turned share links on (HTTP 400 on the page that asked)."""


def share_links_set(*, team: Team, enabled: bool, actor: Any) -> None:
    """Turn the team's share links on or off. Off revokes every link it gave: turning it on
    again does not bring them back."""
    with transaction.atomic():
        before = Team.objects.select_for_update().get(pk=team.pk).share_links_enabled
        Team.objects.filter(pk=team.pk).update(share_links_enabled=enabled)
        team.share_links_enabled = enabled
        revoked = 0
        if not enabled:
            revoked = (Submission.objects.filter(team=team, share_token__isnull=False)
                       .update(share_token=None))
        audit(actor=actor, action="team.share_links", target=f"team:{team.slug}",
              before={"enabled": before}, after={"enabled": enabled, "revoked": revoked})


def submission_share(*, submission: Submission, actor: Any) -> str:
    """The submission's share token, made now if it has none. Raises SharingDisabled."""
    with transaction.atomic():
        locked = Submission.objects.select_for_update().select_related("team").get(
            pk=submission.pk)
        if not locked.team.share_links_enabled:
            raise SharingDisabled("share links are off for your team: turn them on on the "
                                  "team page first")
        if locked.share_token is None:
            locked.share_token = secrets.token_urlsafe(TOKEN_BYTES)
            locked.save(update_fields=["share_token"])
            audit(actor=actor, action="submission.share", target=f"submission:{locked.pk}",
                  before={"shared": False}, after={"shared": True})
        submission.share_token = locked.share_token
        return locked.share_token


def submission_unshare(*, submission: Submission, actor: Any) -> None:
    """Revoke the submission's link: its address answers 404 from now on."""
    if Submission.objects.filter(pk=submission.pk, share_token__isnull=False).update(
            share_token=None):
        audit(actor=actor, action="submission.unshare", target=f"submission:{submission.pk}",
              before={"shared": True}, after={"shared": False})
    submission.share_token = None


def shared_submission(token: str) -> Submission | None:
    """The submission a public link names, while its team shares links and is not hidden."""
    if not token:
        return None
    return (Submission.objects.select_related("team", "release", "hardware")
            .filter(share_token=token, team__share_links_enabled=True, team__hidden=False)
            .first())


def shared_summary(submission: Submission, *, score: dict[str, Any] | None) -> dict[str, Any]:
    """What a public link shows (module docstring): nothing a board would not."""
    jobs = list(EvaluationJob.objects.filter(candidate__submission=submission)
                .select_related("candidate__operator").order_by("candidate__operator__name"))
    results: dict[int, list[dict[str, Any]]] = {job.pk: [] for job in jobs}
    for job_id, shape_id, *values in (
            ShapeResult.objects.filter(job__in=jobs, attempt=F("job__attempts"))
            .order_by("shape__position")
            .values_list("job_id", "shape__shape_id", *SHARED_RESULT_FIELDS)):
        results[job_id].append({"shape_id": shape_id,
                                **dict(zip(SHARED_RESULT_FIELDS, values, strict=True))})
    return {
        "id": submission.pk, "team": submission.team.name,
        "release": f"{submission.release.name} v{submission.release.version}",
        "hardware": submission.hardware.name, "agent": submission.agent,
        "model": submission.model_name, "created_at": submission.created_at,
        "mode": submission.mode, "status": submission_status(jobs),
        "outcome": submission_outcomes([submission.pk])[submission.pk],
        "score": {k: score[k] for k in SHARED_SCORE_FIELDS} if score else None,
        "operators": [{"operator": job.candidate.operator.name, "status": job.status,
                       "mode": job.mode, "shapes_total": job.shapes_total,
                       "results": results[job.pk]} for job in jobs],
    }
