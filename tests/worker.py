"""Real Celery worker processes for tests: the web side's (results) on the test database,
and GPU workers run as a GPU host runs them, from a bundle (evaluation/worker/bundle.py)
with no database, no Django (blocked from import) and no checkout in reach."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.db import connection

from evaluation.protocol import worker_queues
from tests.paths import REPO


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{user}{password}@{host}{port}/{db['NAME']}"


# A GPU host has no Django: importing it fails there, so it must fail here too.
NO_DJANGO_CELERY = textwrap.dedent("""
    import sys

    class NoDjango:
        def find_spec(self, name, path=None, target=None):
            if name == "django" or name.startswith("django."):
                raise ModuleNotFoundError(f"No module named {name!r} (not on a GPU host)")
            return None

    sys.meta_path.insert(0, NoDjango())
    from celery.__main__ import main
    main()
""")


@functools.cache
def gpu_worker_bundle() -> Path:
    """The folder GPU workers run from, built once per test process."""
    from evaluation.worker.bundle import build

    folder = Path(tempfile.mkdtemp(prefix="atrex-gpu-bundle-"))
    atexit.register(shutil.rmtree, folder, True)
    build(folder / "bundle")
    return folder / "bundle"


def _gpu_worker_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DATABASE", "DJANGO", "PYTHONPATH"))}
    env["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})
    if "data_folder_in" in options:  # the filesystem broker: the same folders as the portal's
        env["ATREX_BROKER_DIR"] = str(Path(options["data_folder_in"]).parent)
    env["PYTHONPATH"] = str(gpu_worker_bundle())
    return {**env, **extra}


@contextmanager
def celery_worker(queues: str, log: Path, *, name: str = "test", purge: bool = True,
                  env: dict[str, str] | None = None,
                  beat_schedule: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Start `celery worker`; yield once it reports ready.

    `eval.<hardware>` queues get a GPU worker (its own app, from the bundle, Django
    blocked); `results` gets the web side's worker on the test database. `env` adds to
    the worker's environment (a broker URL, sweeper settings); with `beat_schedule` the
    worker also runs Celery beat (-B), as `make run` does.
    """
    gpu = [q.startswith("eval.") for q in queues.split(",")]
    if any(gpu) and not all(gpu):
        raise ValueError("GPU queues and the results queue are consumed by separate workers")
    common = ["worker", "-Q", queues, "--pool", "solo", "--without-gossip",
              "--without-mingle", "--without-heartbeat", "-n", f"{name}-{os.getpid()}@%h",
              "--loglevel", "INFO"]
    if all(gpu):  # the team queues, then their .low ones (baselines), as run-worker does
        common[2] = worker_queues(queues)
        command = [sys.executable, "-c", NO_DJANGO_CELERY, "-A", "evaluation.worker.app", *common]
        cwd, full_env = gpu_worker_bundle(), _gpu_worker_env(env or {})
    else:
        command = [sys.executable, "-m", "celery", "-A", "portal", *common]
        cwd = REPO
        full_env = {**os.environ, "DATABASE_URL": _database_url(),
                    "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
                    "DJANGO_SETTINGS_MODULE": "portal.settings", **(env or {})}
    if purge:
        command.append("--purge")
    if beat_schedule is not None:
        command += ["-B", "-s", str(beat_schedule)]
    with open(log, "wb") as out:
        worker = subprocess.Popen(command, cwd=cwd, env=full_env, stdout=out,
                                  stderr=subprocess.STDOUT)
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


@contextmanager
def pipeline_workers(tmp_path: Path, hardware: str = "H200") -> Iterator[Path]:
    """The two workers `make run` starts: results (web side) and a GPU worker; yields the
    GPU worker's log."""
    log = tmp_path / "worker.log"
    with celery_worker("results", tmp_path / "results.log", name="results"), \
            celery_worker(f"eval.{hardware}", log, name="eval"):
        yield log


def running(pid: int) -> bool:
    """Exists and has not exited (a zombie has, and waits only for its parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


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
