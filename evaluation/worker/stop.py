"""A run's lifeline to the portal: heartbeats out, stop requests in.

The web tier cannot reach a GPU host except through the broker, and a solo-pool worker
does not read Celery's control channel while a task runs. So each running evaluation
listens on its own queue bound to the fanout exchange `atrex.stop`; a stop message for
its job (a cancel, a requeue by the sweeper, a lost claim) kills the sandboxed child's
process group at once, and the run ends after that shape without reporting. The same
thread sends a heartbeat every few seconds, however long a shape takes: a job whose
heartbeats stop has a dead, frozen or cut-off worker, and the portal's sweeper runs it
again.

Imports no Django: it runs on a bare GPU host.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from celery import Celery
from kombu.entity import Queue
from kombu.message import Message

from evaluation.harness.isolation.child_process import kill_bound_children
from evaluation.protocol import STOP_EXCHANGE, applies_to

log = logging.getLogger(__name__)


class RunStopped(Exception):
    """The portal asked this run to stop (cancelled, requeued or superseded)."""


def kill_children() -> int:
    """SIGKILL every sandboxed child of this process that holds a candidate (its process
    group, and with its PID namespace everything it made). The child kept warm for the next
    job holds none and is spared."""
    return kill_bound_children()


class StopWatch:
    """While a run is in progress: a thread that stops it when the portal says so, and
    calls `heartbeat` every `heartbeat_s` seconds once `beating` is set."""

    def __init__(self, app: Celery, *, job_id: int, attempt: int, run: str,
                 heartbeat: Callable[[], None] | None = None, heartbeat_s: float = 0) -> None:
        self.app = app
        self.job_id, self.attempt, self.run = job_id, attempt, run
        self.stopped = threading.Event()
        self.beating = threading.Event()  # set once the run has reported "started"
        self._heartbeat, self._heartbeat_s = heartbeat, heartbeat_s
        self._next_beat = 0.0
        self._done = threading.Event()
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"stop-watch-{job_id}",
                                        daemon=True)
        with app.connection_for_read() as connection:  # lazy: nothing connects here
            self._errors: tuple[type[BaseException], ...] = (
                OSError, *connection.connection_errors)

    def __enter__(self) -> StopWatch:
        self._thread.start()
        self._listening.wait(timeout=10)  # a stop sent from now on is not missed
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=10)

    def check(self) -> None:
        if self.stopped.is_set():
            raise RunStopped(f"job {self.job_id} attempt {self.attempt}: stopped by the portal")

    def _on_message(self, body: Any, message: Message) -> None:
        if isinstance(body, dict) and applies_to(body, job_id=self.job_id,
                                                 attempt=self.attempt, run=self.run):
            log.warning("job %s attempt %s: stop requested", self.job_id, self.attempt)
            self.stopped.set()
        message.ack()

    def _beat(self) -> None:
        now = time.monotonic()
        if (self._heartbeat is None or self._heartbeat_s <= 0 or not self.beating.is_set()
                or now < self._next_beat or self.stopped.is_set()):
            return
        self._next_beat = now + self._heartbeat_s
        try:
            self._heartbeat()
        except self._errors as exc:
            log.warning("heartbeat of job %s not sent: %s", self.job_id, exc)

    def _watch(self) -> None:
        queue = Queue(f"atrex.stop.{uuid.uuid4().hex}", exchange=STOP_EXCHANGE, routing_key="",
                      durable=False, auto_delete=True)
        while not self._done.is_set():
            try:
                with self.app.connection_for_read() as connection, \
                        connection.Consumer([queue], callbacks=[self._on_message],
                                            accept=["json"]):
                    self._listening.set()
                    while not self._done.is_set():
                        if self.stopped.is_set():
                            kill_children()  # again and again: a restarted child dies too
                        self._beat()
                        with contextlib.suppress(socket.timeout, TimeoutError):
                            connection.drain_events(timeout=0.5)
            except self._errors as exc:
                log.warning("stop watcher lost the broker (%s); reconnecting", exc)
                self._listening.set()
                self._beat()
                self._done.wait(1)
