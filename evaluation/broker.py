"""The embedded default's broker: kombu's filesystem transport, with atomic writes.

kombu creates a message file, then writes it; a consumer listing the folder in between
takes the empty file and fails to decode it, and the message is lost. With several
processes publishing at once (GPU reports, heartbeats, the sweeper) that happens. Here a
message is written under a name no consumer matches, then renamed into place: a reader
sees a whole message or none. Message files are 0600 in 0700 folders (protocol.py).

A worker consumes its queues in the order it was given them, each time from the first
(`PriorityCycle`): a GPU worker lists its team queues before their `.low` ones
(protocol.worker_queues), so baselines and admin re-runs wait while a team's job waits.
kombu's own cycle takes the queues in turn.

kombu's transport ignores `auto_delete`: each running evaluation's stop queue
(worker/stop.py) stayed bound to the `atrex.stop` fanout exchange after its run, and every
later stop message was written once more for each of them, never to be read (51 files
after 17 cancels). Here such a queue is unbound and emptied when its last consumer goes.
"""

from __future__ import annotations

import os
import uuid
from queue import Empty
from time import monotonic
from typing import Any

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps
from kombu.utils.scheduling import FairCycle


class PriorityCycle(FairCycle):
    """FairCycle that starts every get from the first resource: strict order."""

    def get(self, callback: Any, **kwargs: Any) -> Any:
        self.pos = 0
        return super().get(callback, **kwargs)


class Channel(filesystem.Channel):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._auto_delete: set[str] = set()

    def queue_declare(self, queue: Any = None, passive: bool = False, **kwargs: Any) -> Any:
        declared = super().queue_declare(queue, passive, **kwargs)
        if kwargs.get("auto_delete"):
            self._auto_delete.add(declared.queue)
        return declared

    def basic_cancel(self, consumer_tag: Any) -> None:
        queue = self._tag_to_queue.get(consumer_tag)
        super().basic_cancel(consumer_tag)
        if queue in self._auto_delete and queue not in self._tag_to_queue.values():
            # its last consumer gone: off the exchange tables, and its messages with it
            self._auto_delete.discard(queue)
            self.queue_delete(queue)
            self._purge(queue)

    def _reset_cycle(self) -> None:
        self._cycle = PriorityCycle(self._get_and_deliver, self._active_queues,
                                    Empty)

    # kombu names the argument `message` in the base class and `payload` here.
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        folder = self.data_folder_out
        final = os.path.join(folder, f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg")
        partial = os.path.join(folder, f"writing-{uuid.uuid4().hex}")  # no dot: never matched
        # 0600: a job's message holds the team's source and the secret seeds
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(str_to_bytes(dumps(payload)))
        os.replace(partial, final)


class Transport(filesystem.Transport):
    Channel = Channel
