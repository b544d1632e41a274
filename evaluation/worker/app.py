"""The GPU worker's Celery app, configured from the environment alone (no Django).

    celery -A evaluation.worker.app worker -Q eval.H200 --pool solo

- CELERY_BROKER_URL: the broker (redis://, amqp://); default filesystem:// in
  ATREX_BROKER_DIR (default $ATREX_VAR_DIR/broker, else ./var/broker), the embedded
  default's folders, shared with the portal on one machine.
- ATREX_BROKER_VISIBILITY_TIMEOUT (Redis): seconds before an unacknowledged job goes back.
- ATREX_SANDBOX_UID / ATREX_SANDBOX_GID: the candidate's uid (one per worker on a host);
  ATREX_SANDBOX_REQUIRED=1: refuse to start where the sandbox cannot be built.
- ATREX_WARM_CHILDREN (default 2 on a GPU, 1 on a CPU): sandboxed children kept started per DSL, each used by
  one job only; ATREX_WARM_DSLS (default: every DSL this device runs): the DSLs whose
  children are started with the worker.

At start it removes the work areas of workers killed on this host (team source, outputs),
checks the sandbox once, so a misconfigured host fails at start, not on the first job, and
starts the child for its first job; on shutdown it ends the child kept ahead.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_ready, worker_shutdown
from kombu.exceptions import KombuError

from evaluation.harness.isolation.sandbox import SandboxSettings, planned_isolation, workdir_base
from evaluation.harness.isolation.workarea import sweep_stale_areas
from evaluation.protocol import (
    ANNOUNCE_EVERY_S,
    FILESYSTEM_BROKER,
    RECORD_WORKER_TASK,
    RESULTS_QUEUE,
    TASK_SETTINGS,
    Announcement,
    broker_settings,
)

log = logging.getLogger(__name__)


def _broker_dir() -> Path:
    explicit = os.environ.get("ATREX_BROKER_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("ATREX_VAR_DIR", "var")) / "broker"


def _visibility_timeout() -> int:
    raw = os.environ.get("ATREX_BROKER_VISIBILITY_TIMEOUT", "3600")
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"ATREX_BROKER_VISIBILITY_TIMEOUT={raw!r}: expected whole seconds >= 1")
    return int(raw)


app = Celery("atrex-gpu-worker", include=["evaluation.worker.tasks"])
app.conf.update(**broker_settings(os.environ.get("CELERY_BROKER_URL", FILESYSTEM_BROKER),
                                  _broker_dir(), visibility_timeout_s=_visibility_timeout()),
                **TASK_SETTINGS)


@worker_init.connect
def _prepare_host(**_: Any) -> None:
    from evaluation.worker.jobs import warm_pool_size

    settings = SandboxSettings()  # a malformed ATREX_SANDBOX_UID fails here, at start
    warm_pool_size("cpu")  # and a malformed ATREX_WARM_CHILDREN
    swept = sweep_stale_areas(workdir_base(settings))
    if swept:
        log.warning("removed %d work area(s) left by killed workers: %s", len(swept),
                    ", ".join(str(p) for p in swept))
    isolation = planned_isolation(settings, ())  # raises when required and unavailable
    log.info("sandbox: private root %s, uid %s%s", isolation.private_root, isolation.uid,
             "".join(f"; {note}" for note in isolation.notes))


@worker_ready.connect
def _start_first_children(**_: Any) -> None:
    """The first jobs find their children started too (imports, CUDA context, private
    root): a pool per DSL this worker serves (ATREX_WARM_DSLS, ATREX_WARM_CHILDREN)."""
    from evaluation.worker.jobs import prepare_warm_children, warm_pool_size, worker_device

    device = worker_device()
    dsls = prepare_warm_children(device, SandboxSettings())
    log.info("warm children: %d per DSL (%s) on %s", warm_pool_size(device), ", ".join(dsls),
             device)


_stop_announcing = threading.Event()


@worker_ready.connect
def _announce(sender: Any = None, **_: Any) -> None:
    """Tell the portal what this worker evaluates, now and every ANNOUNCE_EVERY_S seconds
    (from a thread: a solo worker's main thread is busy while a job runs)."""
    from evaluation.worker.jobs import worker_capability

    queues = [q.name for q in getattr(getattr(sender, "task_consumer", None), "queues", ())]
    announcement = Announcement(worker=str(getattr(sender, "hostname", "") or "worker"),
                                queues=tuple(queues), **worker_capability())

    def loop() -> None:
        while True:
            try:
                app.send_task(RECORD_WORKER_TASK, args=[announcement.payload()],
                              queue=RESULTS_QUEUE, retry=True,
                              retry_policy={"max_retries": 3, "interval_start": 1})
            except (OSError, KombuError) as exc:  # the broker away: the next one may pass
                log.warning("announcement not sent: %s", exc)
            if _stop_announcing.wait(ANNOUNCE_EVERY_S):
                return

    threading.Thread(target=loop, name="announce", daemon=True).start()


@worker_shutdown.connect
def _stop_children(**_: Any) -> None:
    from evaluation.worker.jobs import close_warm_children

    _stop_announcing.set()
    close_warm_children()
