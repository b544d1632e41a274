"""The Django project: settings, URLs, the Celery app, and the base apps (accounts, audit)."""

# The Celery app must be configured whenever Django is, so `current_app` in services sends to
# the configured broker (Django's documented Celery set-up).
from portal.celery import app as celery_app

__all__ = ("celery_app",)
