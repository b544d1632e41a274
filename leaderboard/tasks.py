"""Web-side task: rescore a submission once one of its jobs has finished, and tell the
team's webhook when that was the last."""

from __future__ import annotations

from celery import shared_task
from django.db import transaction

from leaderboard.services import rescore_submission
from leaderboard.submission_scores import active_score
from submissions.jobs import RESCORE_TASK
from submissions.models import Submission
from submissions.webhooks import submission_ended_notify


@shared_task(name=RESCORE_TASK, acks_late=True)
def rescore_submission_task(submission_id: int) -> None:
    """Rescore; when every job has ended, the team's webhook is called (after commit, by
    its own task: a receiver never holds this one up)."""
    submission = Submission.objects.filter(pk=submission_id).select_related(
        "release", "hardware", "team").first()
    if submission is not None:
        with transaction.atomic():
            rescore_submission(submission)
            submission_ended_notify(submission, score_of=active_score)
