"""A team's ncu profile of one public shape of its own submission: requested here, run by a
GPU worker with the candidate in its sandbox (evaluation/harness/ncu/sandbox.py), stored when
its result comes back on the results queue.

Its own small daily quota (ATREX_NCU_PROFILES_PER_DAY). Only public shapes a job of the
candidate covered can be profiled: the hidden tier is never named, run or reported here.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evaluation.catalog.capability import portal_capability
from evaluation.catalog.models import Shape
from evaluation.protocol import NCU_PROFILE_TASK, ncu_profile_spec
from portal.accounts.models import Team
from portal.audit.models import audit
from portal.errors import DomainError
from submissions.models import Candidate, NcuProfile, Submission
from submissions.services import QuotaExceeded

MAX_ERROR_CHARS = 2000


class ProfileRefused(DomainError):
    """The profile cannot be made as asked: the message says why."""


class ProfileTargetUnknown(DomainError):
    http_status = 404


def ncu_profiles_today(team: Team) -> int:
    day_start = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    return NcuProfile.objects.filter(candidate__submission__team=team,
                                     created_at__gte=day_start).count()


def ncu_available(submission: Submission) -> bool:
    """Whether a GPU worker serves the submission's hardware (or no worker has said)."""
    return portal_capability().can_rank(submission.hardware.name)


def ncu_profile_request(*, submission: Submission, operator: str, shape_id: str,
                        user: Any) -> NcuProfile:
    """Queue a profile of `shape_id` of the submission's `operator` candidate; the team's
    quota is checked under its row lock (two requests at once cannot both take the last)."""
    candidate = (Candidate.objects.filter(submission=submission, operator__name=operator)
                 .select_related("operator", "job", "submission__hardware").first())
    if candidate is None:
        raise ProfileTargetUnknown(f"submission {submission.pk} has no {operator!r} candidate")
    job = getattr(candidate, "job", None)
    # Shape.objects holds the public tier only; of it, the shapes this candidate's job covered
    shape = Shape.objects.filter(operator=candidate.operator, shape_id=shape_id).first()
    if shape is None or job is None or shape_id not in (job.shape_ids or []):
        raise ProfileTargetUnknown(f"{operator} has no shape {shape_id!r} in this submission's "
                                   "evaluation")
    if not ncu_available(submission):
        raise ProfileRefused(f"ncu profiles need a GPU worker for {submission.hardware.name}, "
                             "and this portal has none: its workers run Triton's CPU "
                             "interpreter, which has no hardware counters")
    with transaction.atomic():
        Team.objects.select_for_update().get(pk=submission.team_id)
        limit = settings.ATREX_NCU_PROFILES_PER_DAY
        if ncu_profiles_today(submission.team) >= limit:
            resets = (timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
                      + timedelta(days=1))
            raise QuotaExceeded(f"daily quota of {limit} ncu profiles used; it resets at "
                                f"{resets:%Y-%m-%d %H:%M} UTC")
        profile = NcuProfile.objects.create(candidate=candidate, shape=shape,
                                            requested_by=user if getattr(user, "pk", None)
                                            else None)
        audit(actor=user, action="ncu.request", target=f"submission:{submission.pk}",
              before={}, after={"profile": profile.pk, "operator": operator, "shape": shape_id})
        spec = ncu_profile_spec(
            profile_id=profile.pk, operator=operator, reference_py=candidate.operator.reference_py,
            input_py=candidate.operator.input_py,
            shapes_json=json.dumps({shape_id: {"init_kwargs": shape.init_kwargs,
                                               "input_kwargs": shape.input_kwargs}}),
            shape_id=shape_id, candidate_source=candidate.source, dsl=candidate.dsl,
            hbm_bytes_per_s=submission.hardware.hbm_bytes_per_s)
        queue = submission.hardware.queue
        transaction.on_commit(lambda: current_app.send_task(NCU_PROFILE_TASK, args=[spec],
                                                            queue=queue))
    return profile


def record_ncu_profile(payload: dict[str, Any]) -> None:
    """Store a GPU worker's result (the results queue); a profile already ended is left."""
    profile_id = payload.get("profile_id")
    if not isinstance(profile_id, int):
        return  # no profile of ours
    with transaction.atomic():
        profile = (NcuProfile.objects.select_for_update()
                   .filter(pk=profile_id, status=NcuProfile.Status.QUEUED).first())
        if profile is None:
            return
        raw = payload.get("result")
        result: dict[str, Any] = raw if isinstance(raw, dict) else {}
        kernels = result.get("kernels") if isinstance(result.get("kernels"), list) else []
        profile.result = {"kernels": kernels, "clocks": result.get("clocks") or {},
                          "seconds": result.get("seconds")}
        profile.error = str(result.get("error") or "")[:MAX_ERROR_CHARS]
        profile.status = NcuProfile.Status.DONE if kernels else NcuProfile.Status.FAILED
        profile.worker = str(payload.get("worker", ""))[:200]
        profile.finished_at = timezone.now()
        profile.save()


def ncu_profile_detail(profile: NcuProfile) -> dict[str, Any]:
    return {"id": profile.pk, "submission": profile.candidate.submission_id,
            "operator": profile.candidate.operator.name, "shape": profile.shape.shape_id,
            "status": profile.status, "error": profile.error,
            "kernels": profile.result.get("kernels", []),
            "clocks": profile.result.get("clocks", {}),
            "seconds": profile.result.get("seconds"),
            "created_at": profile.created_at.isoformat(),
            "finished_at": profile.finished_at.isoformat() if profile.finished_at else None}


def ncu_profiles_of(submission: Submission) -> list[dict[str, Any]]:
    return [ncu_profile_detail(p) for p in NcuProfile.objects.filter(
        candidate__submission=submission).select_related("candidate__operator", "shape")]
