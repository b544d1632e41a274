"""What the pages and the API do with a read that found nothing the requester may see."""

from __future__ import annotations

from typing import Any

from portal.lookup import or_404
from submissions.models import Submission
from submissions.selectors import submission_visible


def visible_submission(request: Any, pk: int) -> Submission:
    """Submission `pk` if the request's viewer may see it; else 404, the same answer whether
    it exists or not (who is asking: `request.viewer`, portal/accounts/viewer.py)."""
    return or_404(submission_visible(request.viewer, pk), "no such submission")
