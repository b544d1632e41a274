"""A real Celery worker process for tests, on the same broker and test database."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from celery import current_app
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
def celery_worker(queues: str, log: Path, *, name: str = "test", purge: bool = True,
                  env: dict[str, str] | None = None,
                  beat_schedule: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Start `celery worker` against the test database; yield once it reports ready.

    `env` adds to the worker's environment (a broker URL, sweeper settings); with
    `beat_schedule` the worker also runs Celery beat (-B), as `make run` does.
    """
    env = {**os.environ, "DATABASE_URL": _database_url(),
           "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
           "DJANGO_SETTINGS_MODULE": "portal.settings", **(env or {})}
    command = [sys.executable, "-m", "celery", "-A", "portal", "worker", "-Q", queues,
               "--pool", "solo", "--without-gossip", "--without-mingle",
               "--without-heartbeat", "-n", f"{name}-{os.getpid()}@%h", "--loglevel", "INFO"]
    if purge:
        command.append("--purge")
    if beat_schedule is not None:
        command += ["-B", "-s", str(beat_schedule)]
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
        stray = descendants(worker.pid)
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
        for pid in stray:  # a sandboxed child orphaned by a killed worker
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (its sandboxed children and theirs), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z":  # a zombie has already exited
                parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@contextmanager
def broker(url: str) -> Iterator[None]:
    """Point this process's Celery app at another broker (a private Redis) for a while."""
    app = current_app
    old_conf, old_env = app.conf.broker_url, os.environ.get("CELERY_BROKER_URL")

    def point_at(conf_url: str, env_url: str | None) -> None:
        app.conf.broker_url = conf_url
        if env_url is None:
            os.environ.pop("CELERY_BROKER_URL", None)
        else:
            os.environ["CELERY_BROKER_URL"] = env_url  # Celery reads it before its conf
        app.amqp._producer_pool = None
        app._pool = None

    point_at(url, url)
    try:
        yield
    finally:
        point_at(old_conf, old_env)
