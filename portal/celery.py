"""The web tier's Celery app, configured from Django's settings (CELERY_*): the portal's own
tasks (reports stored, rescores, webhooks, the sweep on beat) run on it, and it sends job
and ncu specs to the GPU workers by task name (`send_task`). A GPU worker runs its own app
without Django (evaluation/worker/app.py); the two share the broker and evaluation/protocol.py,
nothing else."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
app = Celery("atrex")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
