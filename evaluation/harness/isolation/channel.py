"""The parent's end of the channel to a sandboxed child: a request written as one JSON
line on the child's stdin, its events read back from a pipe of their own, questions
answered and hand-overs let go of on the way, and the outputs read from the child's output
area (output_area.py). Everything that arrives is untrusted: a forged, garbled or endless
event breaks the channel, and the child is killed to resynchronise.

The process behind the channel (spawn, death, teardown) is child_process.ChildProcess's.
"""

from __future__ import annotations

import abc
import json
import os
import selectors
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from .limits import ChildGroup
from .output_area import CallTensors, LayoutRefused, OutputArea, TensorLayout
from .sandbox import (
    CandidateError,
    ChannelCorrupted,
    ChildDied,
    ChildTimeout,
)

MAX_EVENT_BYTES = 4 * 2**20  # one event line; real ones are a few KiB

# What the parent does with an event during a request; it answers a question ("ask") with
# the dict it returns (sent to the child as a command line), other events with None.
EventHandler = Callable[[dict[str, Any]], "dict[str, Any] | None"]


class ChildChannel(abc.ABC):
    """Requests to one child process and the events they bring back."""

    _process: subprocess.Popen[bytes] | None
    _events_fd: int | None
    _buffer: bytes
    _timeout_s: float
    _request_id: int
    _area: OutputArea | None  # this process's output area (output_area.py)
    _group: ChildGroup | None
    _processes_at_ready: int | None  # in its control group (check_alone)

    @abc.abstractmethod
    def ensure_started(self) -> None:
        """The process is running, ready and bound before a request is sent."""

    @abc.abstractmethod
    def stderr_tail(self) -> str:
        """The child's last words, for a timeout's or a death's report."""

    @abc.abstractmethod
    def _died(self) -> ChildDied:
        """The process ended: reaped and cleaned up, with its exit described."""

    @abc.abstractmethod
    def _cleanup(self) -> None:
        """Kill the process and everything of it (the channel is out of sync or done)."""

    def request(self, command: Mapping[str, Any], timeout_s: float,
                on_event: EventHandler | None = None) -> dict[str, Any]:
        """Send one command; return its `done` event; raise on error, death or timeout."""
        self.ensure_started()
        return self._exchange(command, timeout_s, on_event)

    def _exchange(self, command: Mapping[str, Any], timeout_s: float,
                  on_event: EventHandler | None = None) -> dict[str, Any]:
        assert self._process is not None and self._process.stdin is not None
        if self._area is not None:
            self._area.forget_taken()  # the last request's calls have all been judged
        self._request_id += 1
        request_id = self._request_id
        try:
            self._process.stdin.write((json.dumps({**command, "req": request_id}) + "\n").encode())
            self._process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None
        self._timeout_s = timeout_s
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                event = self._next_event(deadline)
            except (ChildDied, ChildTimeout):
                self._cleanup()
                raise
            if event.get("req") != request_id:
                self._cleanup()
                raise ChannelCorrupted(str(command.get("cmd")), "the result channel carried an "
                                       "event that belongs to no request (forged or garbled)")
            kind = event.get("event")
            if kind == "done":
                return event
            if kind == "error":
                if event.get("fatal") is True:
                    # The child says it cannot be trusted any more: the next request gets a
                    # fresh process (restarted lazily), never this one.
                    self._cleanup()
                raise CandidateError(str(event.get("stage")), str(event.get("message")),
                                     str(event.get("traceback", "")))
            reply = None
            if on_event is not None:
                try:
                    reply = on_event(event)
                except BaseException:
                    # The child is still working on this request: only a new one is in sync.
                    self._cleanup()
                    raise
            if kind == "handover":
                self._let_go()
            elif kind == "ask":
                if reply is None:  # a question only the parent's judge of timed calls answers
                    self._cleanup()
                    raise ChannelCorrupted(str(command.get("cmd")), "the child asked a "
                                           "question that this request does not answer")
                self._answer(reply)

    def _answer(self, reply: Mapping[str, Any]) -> None:
        """The parent's answer to the child's question between two timed calls."""
        assert self._process is not None and self._process.stdin is not None
        try:
            self._process.stdin.write((json.dumps({"cmd": "answer", **reply}) + "\n").encode())
            self._process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None

    def _let_go(self) -> None:
        """The child waits after a hand-over until the parent has judged or copied the call."""
        assert self._process is not None and self._process.stdin is not None
        try:
            self._process.stdin.write(b'{"cmd": "taken"}\n')
            self._process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None

    def check_alone(self, moment: str) -> None:
        """The child's processes are the ones it started with (its control group, read by
        this side): a helper process the candidate left running could rewrite the output
        area while this side reads it (CandidateError otherwise). Where there is no group
        (not root), the child's own census (child_core._other_processes) is all there is."""
        if self._group is None or self._processes_at_ready is None:
            return
        now = self._group.process_count()
        if now > self._processes_at_ready:
            raise CandidateError("performance", f"{now - self._processes_at_ready} process(es) "
                                                f"besides the child were alive at {moment}: all "
                                                "work must happen inside forward, in its process")

    def read_call(self, offset: object, layout: Sequence[tuple[TensorLayout, torch.dtype]],
                  device: torch.device) -> CallTensors:
        """A call's outputs from this child's output area (LayoutRefused if misplaced)."""
        if self._area is None:
            raise LayoutRefused("the result channel reported outputs from no running child")
        return self._area.read_call(offset, layout, device)

    def take_call(self, offset: object, raw_layout: object) -> None:
        """Copy a handed-over call out of the output area while the child waits, to judge it
        after the request (read with `read_taken`): for shapes judged one side at a time."""
        if self._area is not None:
            self._area.take(offset, raw_layout)

    def read_taken(self, offset: object, layout: Sequence[tuple[TensorLayout, torch.dtype]],
                   device: torch.device) -> CallTensors:
        """A call copied at its hand-over (LayoutRefused if none was, or it was misplaced)."""
        if self._area is None:
            raise LayoutRefused("the result channel reported outputs from no running child")
        return self._area.read_call(offset, layout, device, taken=True)

    def _next_event(self, deadline: float) -> dict[str, Any]:
        assert self._events_fd is not None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChildTimeout(self._timeout_s, self.stderr_tail())
            with selectors.DefaultSelector() as selector:
                selector.register(self._events_fd, selectors.EVENT_READ)
                if not selector.select(timeout=remaining):
                    raise ChildTimeout(self._timeout_s, self.stderr_tail())
            chunk = os.read(self._events_fd, 1 << 16)
            if not chunk:
                raise self._died()
            self._buffer += chunk
            if len(self._buffer) > MAX_EVENT_BYTES and b"\n" not in self._buffer:
                # The channel's pipe is the candidate's to write too: an endless line would
                # otherwise grow the trusted parent without bound.
                self._buffer = b""
                self._cleanup()
                raise ChannelCorrupted("channel", f"the result channel sent an event longer "
                                       f"than {MAX_EVENT_BYTES // 2**20} MiB")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            event = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            event = None
        return event if isinstance(event, dict) else {"event": "garbage"}
