"""The sandboxed side of an evaluation: runs the candidate, never sees expected outputs.

Started by `child_process.ChildProcess` as `python -I child_main.py` in a fresh directory that
holds only the operator's public files and the candidate's source. Commands arrive as
JSON lines on stdin; events go back as JSON lines on a dedicated pipe (the candidate's
own prints go to stdout/stderr, which the parent keeps apart). Output tensors are written
as raw bytes into the shared output area the parent made (output_area.py); the parent
checks their declared layout and place against what it expects before it reads them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

from .child_checks import CorrectnessRequests
from .child_core import _tail
from .child_timing import TimingRequests
from .integrity import install_audit_tripwire
from .output_area import AreaWriter


class ChildRuntime(CorrectnessRequests, TimingRequests):
    """The child's runtime: a command `X` from the parent is served by `do_X` (child_core:
    bind; child_checks: correctness, adoption; child_timing: timing)."""


def main() -> None:
    workdir = Path.cwd()
    events = os.fdopen(int(os.environ.pop("ATREX_EVENT_FD")), "w", buffering=1)
    try:
        area = AreaWriter(int(os.environ.pop("ATREX_OUTPUT_FD")),
                          int(os.environ.pop("ATREX_OUTPUT_BYTES")),
                          pin=os.environ.get("ATREX_DEVICE") == "cuda")
        runtime = ChildRuntime(workdir, events, area)
    except Exception as exc:  # noqa: BLE001 - report why the sandbox could not start
        events.write(json.dumps({"event": "error", "stage": "harness",
                                 "message": f"child start failed: {exc}", "traceback": _tail()}))
        events.flush()
        raise
    install_audit_tripwire()  # before any candidate code: it sees every later audit hook
    started = time.perf_counter()
    runtime.warm_up()
    ChildRuntime.emit(runtime, event="ready", device=str(runtime.device), torch=torch.__version__,
                      warm_up_seconds=time.perf_counter() - started, monotonic=time.monotonic())
    runtime.serve(sys.stdin)
