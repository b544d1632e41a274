"""The Django project: settings, URLs, the Celery app, and the base apps (accounts, audit)."""
