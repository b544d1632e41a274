"""Web-side task: rescore a submission once one of its jobs has finished."""

from __future__ import annotations

from celery import shared_task

from leaderboard.services import rescore_submission
from submissions.models import Submission

RESCORE_TASK = "leaderboard.rescore_submission"


@shared_task(name=RESCORE_TASK, acks_late=True)
def rescore_submission_task(submission_id: int) -> None:
    submission = Submission.objects.filter(pk=submission_id).select_related("release",
                                                                            "hardware").first()
    if submission is not None:
        rescore_submission(submission)
