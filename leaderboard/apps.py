from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    """Scoring, weight sets and boards (issue 4); an empty app until then."""

    name = "leaderboard"
