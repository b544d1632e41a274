"""A submission's score under its release's active weights, as the submission's own page,
API, shared page and webhook show it. The leaderboard reads its stored scores here and hands
them down: the views on top put them in their context, the rescore task gives them to the
webhook; submissions code never reads a score."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Max

from leaderboard.models import SubmissionScore
from submissions.models import EvaluationJob, Submission

# The score's fields a submission's page and API show (of leaderboard.scoring.SCORE_FIELDS).
ACTIVE_SCORE_FIELDS = ("ranked", "complete", "unevaluated_shapes", "lost_jobs", "aggregate",
                       "unweighted_mean", "memory", "compute", "prefill", "decode",
                       "correctness_rate", "dsl_adoption_rate", "by_operator", "intervals",
                       "hidden_by_operator", "not_generalising", "generalisation",
                       "generalisation_reasons", "excluded")


def active_weights_score(submission: Submission) -> SubmissionScore | None:
    """The submission's score under its release's active weights, with them; None until a
    rescore has written one."""
    return (SubmissionScore.objects.filter(submission=submission, weight_set__active=True)
            .select_related("weight_set").first())


def active_score(submission: Submission) -> dict[str, Any] | None:
    """The score under the active weights, as the submission page shows it; a job that ended
    after the score was computed means a rescore is still on its way (`current` is false). A
    check submission is never `ranked`, nor one evaluated in Triton's interpreter (the
    boards leave it out: RANKABLE), so its page, API and webhook say what the board does."""
    score = active_weights_score(submission)
    if score is None:
        return None
    last_scored = (EvaluationJob.objects.filter(candidate__submission=submission,
                                                finished_at__isnull=False)
                   .aggregate(last=Max("finished_at"))["last"])
    values = {field: getattr(score, field) for field in ACTIVE_SCORE_FIELDS}
    values["ranked"] = values["ranked"] and not submission.is_check and not score.interpreter_jobs
    return {"weights_version": score.weight_set.version, **values,
            "computed_at": score.computed_at.isoformat(),
            "current": last_scored is None or score.computed_at >= last_scored}


def submission_settled(submission: Submission) -> bool:
    """Nothing more will change: every job has ended and, when one was scored, the score
    under the active weights was computed after the last one ended (what a long poll waits
    for). A release without active weights never gets a score: ended is settled there."""
    jobs = EvaluationJob.objects.filter(candidate__submission=submission)
    if jobs.filter(status__in=EvaluationJob.Status.active()).exists():
        return False
    if not jobs.filter(status=EvaluationJob.Status.SCORED).exists():
        return True
    if not submission.release.weight_sets.filter(active=True).exists():
        return True
    score = active_score(submission)
    return score is not None and bool(score["current"])


def with_active_aggregates(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of `submissions.selectors.recent_submissions` with each submission's S_agg under
    its release's active weights (`scored`: whether there is such a score yet; `aggregate`
    None there means not timed: correct, without a GPU time)."""
    rows = list(rows)
    scores = {row["submission_id"]: row for row in (
        SubmissionScore.objects.filter(submission_id__in=[r["submission"].pk for r in rows],
                                       weight_set__active=True)
        .values("submission_id").annotate(aggregate=Max("aggregate"))
        .order_by())}
    return [{**row, "scored": row["submission"].pk in scores,
             "aggregate": scores.get(row["submission"].pk, {}).get("aggregate")}
            for row in rows]
