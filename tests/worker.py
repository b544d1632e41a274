"""A real Celery worker process for tests, on the same broker and test database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection

from tests.conftest import REPO


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{user}{password}@{host}{port}/{db['NAME']}"


@contextmanager
def celery_worker(queues: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Start `celery worker` against the test database; yield once it reports ready."""
    env = {**os.environ, "DATABASE_URL": _database_url(),
           "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
           "DJANGO_SETTINGS_MODULE": "portal.settings"}
    command = [sys.executable, "-m", "celery", "-A", "portal", "worker", "-Q", queues,
               "--pool", "solo", "--purge", "--without-gossip", "--without-mingle",
               "--without-heartbeat", "-n", f"test-{os.getpid()}@%h", "--loglevel", "INFO"]
    with open(log, "wb") as out:
        worker = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while b"ready." not in log.read_bytes():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"celery worker did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
