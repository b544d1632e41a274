"""The Celery app. Web-side tasks and the GPU task share it; queues keep them apart."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
app = Celery("atrex")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
