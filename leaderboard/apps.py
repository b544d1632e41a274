from typing import Any

from django.apps import AppConfig
from django.db.models.signals import pre_delete


class LeaderboardConfig(AppConfig):
    """Scoring, weight sets and boards (issue 4); an empty app until then."""

    name = "leaderboard"

    def ready(self) -> None:
        from leaderboard.models import ScoreSummary

        pre_delete.connect(_summary_deleted, sender=ScoreSummary,
                           dispatch_uid="leaderboard.summary_deleted")


def _summary_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A deleted summary (its submission or team deleted) leaves its board's totals."""
    from leaderboard.services import summary_leaves_board

    summary_leaves_board(instance)
